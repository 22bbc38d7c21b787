"""The replay's Pydantic AI agent (``--agent pydantic-ai``) against the hand-written one.

One run each through a real ``ControlPlane`` (not started: run and worker scope need no server),
the real Pydantic AI agent loop and the SDK's integration, ``FunctionModel`` as the scripted
model; model requests to any real provider are forbidden. Simulated time moves only when the
replay sleeps, so the two agents can be compared step for step.
"""

from __future__ import annotations

import random

import pytest

from breaker_panel import ControlPlane, PlaneConfig
from breakers.replay.agent import Recovery, RunPlayer, RunRecord, Stage, play_hand_written
from breakers.replay.modes import SCOPES_BY_MODE
from breakers.replay.pydantic_ai_agent import PydanticAIPlayer
from breakers.replay.scenario import Scenario
from tests.economics.clocks import SteppedClock

DOWN = Scenario(baseline_s=0.0, wrap_up_steps=2)  # the vendor is down for the whole run
HEALTHY = Scenario(baseline_s=10_000.0)  # ... and healthy for all of it


pytestmark = pytest.mark.usefixtures("no_model_requests")


def _play(player: RunPlayer, mode: str, scenario: Scenario = DOWN) -> tuple[RunRecord, list]:
    scopes = tuple(s for s in SCOPES_BY_MODE[mode] if s != "fleet") or ("run",)
    plane = ControlPlane(
        "http://127.0.0.1:9",
        token="t",
        worker_id="w1",
        config=PlaneConfig(scopes=scopes if SCOPES_BY_MODE[mode] else ()),
        start=False,
    )
    stage = Stage(scenario=scenario, mode=mode, clock=SteppedClock(), recovery=Recovery())
    record = player(stage, plane, random.Random(7))
    events = plane.buffered()
    plane.close(timeout=0)
    return record, events


def _figures(record: RunRecord) -> tuple[object, ...]:
    return (
        record.model_calls,
        record.spend,
        record.search_calls,
        record.search_calls_failing,
        record.http_attempts,
        record.degraded,
        record.wrap_up_started_at,
        record.met,
    )


@pytest.mark.parametrize("mode", ["none", "run", "worker"])
def test_both_agents_make_the_same_calls_and_spend_the_same(mode: str) -> None:
    hand, hand_events = _play(play_hand_written, mode)
    framework, events = _play(PydanticAIPlayer(), mode)
    assert _figures(framework) == _figures(hand)

    # The same events reached the control plane's buffer: model calls priced alike, the same
    # tool outcomes, and the run's end as the scripted model decided it.
    def shape(evs: list) -> list[tuple[object, ...]]:
        return [
            (e["type"], e.get("tool"), e.get("outcome"), e.get("cost_usd"), e.get("status"))
            for e in evs
            if e["type"] in ("model.call", "tool.call", "run.finished")
            and e.get("tool") != "read_page"
        ]

    assert shape(events) == shape(hand_events)

    # The prompt caches see the same prompts: each call's tools array, history and notice
    # (their times may differ by the framework's own pace, as ``_figures`` leaves them out).
    def prompts(record: RunRecord) -> list[tuple[object, ...]]:
        return [(p.tools, p.history, p.notice, p.output_tokens) for p in record.prompts]

    assert prompts(framework) == prompts(hand)
    assert len(framework.prompts) == framework.model_calls
    finished = next(e for e in events if e["type"] == "run.finished")
    assert (finished["degraded"], finished["steps"]) == (hand.degraded, hand.model_calls)


def test_through_pydantic_ai_the_removed_tool_leaves_the_request_and_the_model_wraps_up() -> None:
    record, events = _play(PydanticAIPlayer(), "run")
    assert record.search_calls_failing == DOWN.threshold
    assert record.wrap_up_started_at is not None
    assert record.model_calls == record.wrap_up_started_at - 1 + DOWN.wrap_up_steps
    assert [e["state"] for e in events if e["type"] == "breaker.transition"] == ["open"]


def test_a_healthy_vendor_gives_the_same_five_step_answer() -> None:
    framework, _ = _play(PydanticAIPlayer(), "fleet", HEALTHY)
    hand, _ = _play(play_hand_written, "fleet", HEALTHY)
    assert _figures(framework) == _figures(hand)
    assert (framework.model_calls, framework.degraded, framework.met) == (5, False, "healthy tool")
