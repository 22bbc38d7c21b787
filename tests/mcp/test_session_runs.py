"""One run per client session (FleetBreakers): its calls in order, a tool that comes back is
called again within it, and the run finishes when the session ends or goes idle. In-process: a
ControlPlane without its threads (`start=False`), its events read from its buffer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from breaker_panel import ControlPlane, ToolFailure
from breaker_panel.per_call import FleetBreakers

DOWN = ToolFailure("503 from vendor", retryable=True)
FLEET_OPEN = {"version": 2, "tools": {"web_search": {"state": "forced_open", "reason": "outage"}}}
FLEET_CLOSED = {"version": 3, "tools": {}}


@pytest.fixture
def breakers() -> Iterator[FleetBreakers]:
    plane = ControlPlane("http://127.0.0.1:9", token="t", worker_id="gw", start=False)
    yield FleetBreakers(plane, agent="desk")
    plane.close(timeout=0)


def events(breakers: FleetBreakers, kind: str) -> list[dict[str, Any]]:
    return [e for e in breakers.plane.buffered() if e["type"] == kind]


def call(breakers: FleetBreakers, tool: str, session: str, failure: Any = None) -> bool:
    record = breakers.begin(tool, session=session, others=["echo", tool])
    if record.refused:
        return False
    record.finish(failure)
    return True


def test_a_sessions_calls_are_one_run_in_order(breakers: FleetBreakers) -> None:
    for tool in ("web_search", "echo", "web_search"):
        assert call(breakers, tool, "session:a")
    assert call(breakers, "echo", "session:b")
    started = events(breakers, "run.started")
    assert len(started) == 2  # one per session, not one per call
    run_a = started[0]["run_id"]
    calls_a = [e for e in events(breakers, "tool.call") if e["run_id"] == run_a]
    assert [(e["tool"], e["step"]) for e in calls_a] == [
        ("web_search", 1),
        ("echo", 2),
        ("web_search", 3),
    ]
    assert events(breakers, "run.finished") == []  # the sessions go on


def test_a_tool_that_comes_back_is_called_again_in_the_same_session(
    breakers: FleetBreakers,
) -> None:
    assert call(breakers, "web_search", "s")
    breakers.plane.update_fleet(FLEET_OPEN, authoritative=True)
    assert not call(breakers, "web_search", "s")
    assert not call(breakers, "web_search", "s")
    breakers.plane.update_fleet(FLEET_CLOSED, authoritative=True)
    assert call(breakers, "web_search", "s")  # a run would have kept it removed
    outcomes = [e["outcome"] for e in events(breakers, "tool.call")]
    assert outcomes == ["success", "blocked", "blocked", "success"]
    # The removal is on the run page once, not once per refused call.
    assert len([e for e in events(breakers, "breaker.transition") if e.get("run_id")]) == 1
    assert len(events(breakers, "run.started")) == 1


def test_an_idle_or_ended_session_finishes_its_run(breakers: FleetBreakers) -> None:
    assert call(breakers, "echo", "idle")
    assert call(breakers, "echo", "ended")
    breakers.end_session("ended")
    assert len(events(breakers, "run.finished")) == 1
    assert breakers.end_idle(3600) == 0  # "idle" called just now
    assert breakers.end_idle(0) == 1
    finished = events(breakers, "run.finished")
    assert len(finished) == 2 and all(e["status"] == "completed" for e in finished)
    assert call(breakers, "echo", "idle")  # the same client again: a new run
    assert len(events(breakers, "run.started")) == 3
