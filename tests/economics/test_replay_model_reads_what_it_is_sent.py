"""The replay's model acts on what the SDK actually sends it, so a removal bug shows in figures.

One run of the replay's own ``_play_run`` through a real ``ControlPlane`` (not started: no
server is needed for worker scope), with the vendor down for the whole run.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from breaker_panel import ControlPlane, PlaneConfig
from breaker_panel.client import Run
from breaker_panel.worker import RunBreakers
from breakers.replay.agent import Recovery, RunRecord, _play_run
from breakers.replay.modes import SCOPES_BY_MODE
from breakers.replay.scenario import Scenario
from tests.economics.clocks import SteppedClock

# The vendor is down from the first simulated second to long after the run.
DOWN = Scenario(baseline_s=0.0, wrap_up_steps=2)


@pytest.fixture
def plane() -> Iterator[ControlPlane]:
    plane = ControlPlane(
        "http://127.0.0.1:9",
        token="t",
        worker_id="w1",
        config=PlaneConfig(scopes=("worker",)),
        start=False,
    )
    yield plane
    plane.close(timeout=0.1)


def _one_run(plane: ControlPlane, mode: str, scenario: Scenario = DOWN) -> RunRecord:
    return _play_run(
        scenario=scenario,
        mode=mode,
        plane=plane,
        clock=SteppedClock(),
        rng=random.Random(7),
        recovery=Recovery(),
    )


def test_with_removal_working_the_run_stops_after_threshold_failures_and_wraps_up(
    plane: ControlPlane,
) -> None:
    record = _one_run(plane, "worker")
    assert record.search_calls_failing == DOWN.threshold
    assert record.wrap_up_started_at is not None
    # Each of the two wrap-up steps is a paid model call.
    steps_before = record.wrap_up_started_at - 1
    assert record.model_calls == steps_before + DOWN.wrap_up_steps
    assert record.degraded


def test_a_tool_left_in_the_tools_array_with_no_notice_reaches_the_vendor(
    plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A removal bug: the breaker opens, but the tool is never taken out and nothing is said.
    # (Run.available is the run's breakers' own method, bound per run: break it there.)
    monkeypatch.setattr(RunBreakers, "available", lambda self, tools: list(tools))
    monkeypatch.setattr(Run, "notice", lambda self: None)
    record = _one_run(plane, "worker")
    assert record.wrap_up_started_at is None
    assert record.model_calls == DOWN.step_budget
    assert record.search_calls_failing > 2 * DOWN.threshold  # the bill shows the bug


def test_the_notice_alone_stops_the_model_asking(
    plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tools array still offers the tool; the notice (the SDK's own) says it is gone.
    filtered = RunBreakers.available

    def offer_everything(self: RunBreakers, tools: Any) -> list[Any]:
        filtered(self, tools)  # the run still learns what it offers (its notice needs that)
        return list(tools)

    monkeypatch.setattr(RunBreakers, "available", offer_everything)
    # A model that always obeys the notice: how often one does not, and what refusing its
    # calls then costs, is tests/economics/test_replay_caching.py.
    obedient = Scenario(baseline_s=0.0, wrap_up_steps=2, ignores_notice_probability=0.0)
    record = _one_run(plane, "worker", obedient)
    assert record.search_calls_failing == DOWN.threshold
    assert record.wrap_up_started_at is not None


def test_fail_fast_uses_exactly_fleet_mode_s_scopes() -> None:
    assert SCOPES_BY_MODE["fail-fast"] == SCOPES_BY_MODE["fleet"] == ("fleet",)


def test_wrap_up_steps_change_what_a_removed_run_costs(plane: ControlPlane) -> None:
    costs: dict[int, Any] = {}
    for steps in (1, 2, 5):
        fresh = ControlPlane(
            "http://127.0.0.1:9",
            token="t",
            worker_id=f"w{steps}",
            config=PlaneConfig(scopes=("worker",)),
            start=False,
        )
        costs[steps] = _one_run(fresh, "worker", Scenario(baseline_s=0.0, wrap_up_steps=steps))
        fresh.close(timeout=0.1)
    assert costs[1].spend < costs[2].spend < costs[5].spend
    assert [costs[n].model_calls - costs[1].model_calls for n in (1, 2, 5)] == [0, 1, 4]
