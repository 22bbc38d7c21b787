"""``make replay-check``'s verdict on two replays, quiet and busy (pure: no server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from breakers.replay.check import check, main, push_vs_poll


def report(fleet_spend: float, fleet_calls: int, none_spend: float = 408.0) -> dict[str, Any]:
    return {
        "modes": [
            {"mode": "none", "model_spend_usd": none_spend, "web_search_calls": 3686},
            {"mode": "fleet", "model_spend_usd": fleet_spend, "web_search_calls": fleet_calls},
        ]
    }


def test_the_same_figures_under_load_pass() -> None:
    assert check(report(20.8, 35), report(22.0, 39)) == []


def test_figures_that_move_with_load_fail_naming_what_moved() -> None:
    failures = check(report(20.8, 35), report(30.7, 182))
    assert failures[0].startswith("fleet spend differs by 48% between quiet")
    assert failures[1].startswith("fleet vendor calls differs by 420%")
    assert failures[2] == "busy: fleet sent 182 calls to the failing vendor; the limit is 60"


def test_fleet_over_a_fifth_of_none_fails() -> None:
    assert check(report(90.0, 30), report(90.0, 30)) == [
        "quiet: fleet spends 22.1% of mode none; the limit is 20%",
        "busy: fleet spends 22.1% of mode none; the limit is 20%",
    ]


def test_a_replay_without_the_modes_compared_fails() -> None:
    assert check({"modes": []}, report(20.0, 30)) == ["the quiet replay has no fleet or none mode"]


def test_push_against_poll_counts_the_calls_saved() -> None:
    assert push_vs_poll(report(20.8, 35), report(22.1, 41)).startswith(
        "fleet push vs poll: 35 against 41 calls to the failing vendor (+6 saved by push)"
    )


def test_the_docs_tables_come_from_the_replay_s_figures() -> None:
    from breakers.replay.check import sensitivity_table

    fleet = {
        "mode": "fleet",
        "model_spend_usd": 20.0,
        "spend_by_wrap_up_steps": {"1": 10.0, "2": 20.0, "5": 60.0},
        "floor_spend_by_wrap_up_steps": {"1": 9.1, "2": 19.4, "5": 57.5},
    }
    worker = {**fleet, "mode": "worker"}
    table = sensitivity_table(
        {"modes": [{"mode": "none", "model_spend_usd": 400.0}, worker, fleet]}
    )
    assert "| fleet | $10.00 (2.5%) | $20.00 (5.0%) | $60.00 (15.0%) |" in table
    assert table.endswith("| floor | 2.3% | 4.8% | 14.4% |")


def test_the_tables_of_a_replay_of_one_mode_are_its_own_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `simulate_outage --mode fleet --json`: no none or worker to compare with.
    fleet = {
        "mode": "fleet",
        "runs": 20,
        "model_calls": 57,
        "model_spend_usd": 1.78,
        "mean_run_duration_s": 25.4,
        "p95_run_duration_s": 102.0,
        "web_search_calls": 13,
        "http_attempts": 85,
        "degraded_runs": 20,
        "recovery_lag_s": 2.0,
    }
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"modes": [fleet]}))
    assert main(["--markdown", str(path)]) == 0
    assert "| fleet | 20 | 57 | $1.78 |" in capsys.readouterr().out
    assert main([str(path), str(path)]) == 1
    assert "FAIL the quiet replay has no fleet or none mode" in capsys.readouterr().out
