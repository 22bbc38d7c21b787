"""What the Outages page, the incident page and the board say about a replay: computed from its
figures, with the model's assumptions and the wrap-up sensitivity."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from breakers.replay.outage import ReplayBatch, Scenario
from controlplane.dashboard.economics import outage_comparison
from controlplane.dashboard.replay_banner import playing_replay
from controlplane.dashboard.replay_findings import incident_findings, replay_findings
from runs.incident_runs import IncidentMeasures
from runs.models import OutageReplay
from runs.outage_economics import TIMES, PeriodStats

pytestmark = pytest.mark.django_db

SPEND = {"none": 408.0, "fail-fast": 408.0, "run": 155.6, "worker": 23.9, "fleet": 20.8}
CALLS = {"none": 3686, "fail-fast": 48, "run": 1705, "worker": 104, "fleet": 35}
DURATION = {"none": 378.7, "fail-fast": 46.6, "run": 177.8, "worker": 14.3, "fleet": 7.2}


def _summary(mode: str) -> dict[str, Any]:
    spend = SPEND[mode]
    return {
        "mode": mode,
        "runs": 340,
        "model_spend_usd": spend,
        "mean_run_duration_s": DURATION[mode],
        "web_search_calls": CALLS[mode],
        "http_attempts": CALLS[mode] * 5,
        "wrap_up_steps": 2,
        "spend_by_wrap_up_steps": {"1": spend * 0.6, "2": spend, "5": spend * 2.1},
        "floor_spend_by_wrap_up_steps": {"1": 9.1, "2": 19.38, "5": 57.5},
    }


@pytest.fixture
def batch() -> ReplayBatch:
    start = timezone.now() - timedelta(minutes=10)
    replays = []
    for i, mode in enumerate(("none", "fail-fast", "run", "worker", "fleet")):
        began = start + timedelta(seconds=40 * i)
        replays.append(
            OutageReplay.objects.create(
                mode=mode,
                speed=60.0,
                worker_prefix=f"research-replay-x-{mode}-",
                started_at=began,
                outage_started_at=began + timedelta(seconds=4),
                outage_ended_at=began + timedelta(seconds=26),
                finished_at=began + timedelta(seconds=32),
                scenario={"batch": "b1", "wrap_up_steps": 2, "step_budget": 20},
                summary=_summary(mode),
            )
        )
    return ReplayBatch(tuple(replays))


def test_findings_are_computed_from_the_batch_s_figures(batch: ReplayBatch) -> None:
    findings = replay_findings(outage_comparison(batch=batch))
    text = " ".join(findings.findings)
    assert f"8.1{TIMES} faster than no breaker, and total model spend did not change" in text
    assert "Mode fleet spent 5.1% of mode none's model spend" in text
    assert "Removing the tool is worth $387.20 here" in text
    assert "could not cost less than 4.8% of mode none" in text
    assert findings.wrap_up_steps == 2
    assert [row.mode for row in findings.sensitivity] == ["run", "worker", "fleet"]
    fleet = findings.sensitivity[-1]
    assert [(n, share) for n, _, share in fleet.cells] == [(1, "3.1%"), (2, "5.1%"), (5, "11%")]


def test_the_assumptions_are_stated_in_plain_words(batch: ReplayBatch) -> None:
    assumptions = " ".join(replay_findings(outage_comparison(batch=batch)).assumptions)
    assert "The model is scripted, not a paid LLM" in assumptions
    assert "takes 2 model calls to finish with what it has" in assumptions
    assert "read exactly like a failure" in assumptions


def test_the_outages_page_shows_findings_assumptions_and_sensitivity(
    client: Client, batch: ReplayBatch
) -> None:
    client.force_login(User.objects.create_user("v", password="v-pass-123456"))
    page = client.get("/outages/").content.decode()
    assert "only removing the tool makes them cheaper" not in page
    assert "What the model assumes" in page
    assert "2 wrap-up steps (replayed)" in page
    assert "Removing the tool is worth $387.20 here" in page


def test_a_replay_that_predates_wrap_up_steps_says_it_answered_at_once() -> None:
    scenario = Scenario.from_record({"step_budget": "20", "wrap_up_steps": "bogus"})
    assert scenario.wrap_up_steps == Scenario.wrap_up_steps
    assert Scenario.from_record({"usd_per_million_input": "7"}).usd_per_million_input == Decimal(
        "7"
    )


def test_the_board_says_which_replay_mode_is_playing(client: Client, batch: ReplayBatch) -> None:
    assert playing_replay() is None
    fleet = batch.replays[-1]
    OutageReplay.objects.filter(pk=fleet.pk).update(finished_at=None)
    playing = playing_replay()
    assert playing is not None and (playing.mode, playing.position) == ("fleet", 5)
    client.force_login(User.objects.create_user("v", password="v-pass-123456"))
    banner = client.get("/replay-banner/").content.decode()
    assert "An outage replay is playing" in banner and "<strong>fleet</strong>" in banner


def test_incident_findings_read_the_incident_s_own_table() -> None:
    now = timezone.now()

    def measures(runs: int, spend: str, calls: int, vendor: int, blocked: int) -> Any:
        return IncidentMeasures(now, now, runs, 0, 0, Decimal(spend), calls, vendor, 0, 0, blocked)

    sentences = incident_findings(
        during=measures(100, "120", 500, 40, 460),
        before=measures(20, "3.2", 60, 60, 0),
        spend_during=PeriodStats(runs=90, mean_duration_s=5.0, mean_spend_usd=1.2),
        spend_before=PeriodStats(runs=20, mean_duration_s=9.0, mean_spend_usd=0.16),
    )
    assert sentences[0] == (
        "Model spend per run rose by 650% ($0.16 before, $1.20 during: the mean of the finished "
        "runs, as in the chart)."
    )
    assert "40 calls reached the vendor during the incident (60 before); 92%" in sentences[1]


def test_findings_say_how_each_mode_got_its_tool_back(batch: ReplayBatch) -> None:
    lags = {"none": 2.0, "fail-fast": 50.0, "run": 2.0, "worker": 2.0, "fleet": 50.0}
    for replay in batch.replays:
        summary = {**replay.summary, "recovery_lag_s": lags[replay.mode]}
        if replay.mode in ("none", "run", "worker"):
            summary["fleet_reset_reason"] = "its agents do not use the fleet breaker"
        if replay.mode == "fleet":
            summary["fleet_reset_reason"] = "no trial call closed it within 20 simulated minutes"
        replay.summary = summary
        replay.save(update_fields=["summary"])
    text = " ".join(replay_findings(outage_comparison(batch=batch)).findings)
    assert (
        "web_search was offered and working again after: none 2 s, fail-fast 50 s, run 2 s, "
        "worker 2 s, fleet 50 s." in text
    )
    assert "In mode fleet the fleet breaker did not close by itself (no trial call" in text
    assert "Modes none, run, worker never consult the fleet breaker" in text
    assert "In mode fail-fast" not in text
