"""Property: however a stream of events is cut into batches and resent, ingest ends where sending
it as one batch ends (the same rows, and the same fleet state when new events keep their order).

Runs against both writers, with several workers that reuse each other's run ids.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakers.fleet_service import fleet_state
from breakers.models import FleetTransition, Incident, Tool
from runs.models import (
    FleetBacklog,
    IngestedEvent,
    ModelCall,
    ReportedTransition,
    Run,
    ToolCall,
    Worker,
)
from runs.services import ingest_batch

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
WORKERS = ("w-1", "w-2", "w-3")
TOOLS = ("web_search", "read_page")


@st.composite
def run_events(draw: st.DrawFn, run_id: str) -> list[dict[str, Any]]:
    """One run's events in the order its agent emits them."""
    events: list[dict[str, Any]] = [
        {"type": "run.started", "run_id": run_id, "agent": "research", "step_budget": 20}
    ]
    for step in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["tool.call", "tool.call", "model.call", "breaker.transition"]))
        if kind == "tool.call":
            events.append({
                "type": kind, "run_id": run_id, "step": step, "tool": draw(st.sampled_from(TOOLS)),
                "outcome": draw(st.sampled_from(["retryable", "retryable", "success", "semantic",
                                                 "blocked"])),
                "attempts": draw(st.integers(0, 5)), "error": None,
            })  # fmt: skip
        elif kind == "model.call":
            events.append({
                "type": kind, "run_id": run_id, "step": step, "model": "m",
                "input_tokens": draw(st.integers(0, 9000)), "output_tokens": 10,
                "cost_usd": draw(st.sampled_from([0.0, 0.061, 0.5])),
            })  # fmt: skip
        else:
            scope = draw(st.sampled_from(["run", "fleet", "worker"]))
            events.append({
                "type": kind, "run_id": None if scope == "worker" else run_id, "scope": scope,
                "tool": draw(st.sampled_from(TOOLS)), "state": "open", "reason": "503",
            })  # fmt: skip
    if draw(st.booleans()):
        events.append({"type": "run.finished", "run_id": run_id, "status": "completed"})
    return events


@st.composite
def streams(draw: st.DrawFn) -> list[tuple[str, list[dict[str, Any]]]]:
    """Per worker, its events with ids and times: run ids repeat across workers on purpose."""
    ids = itertools.count()
    out = []
    for worker in draw(st.lists(st.sampled_from(WORKERS), min_size=1, max_size=3, unique=True)):
        events: list[dict[str, Any]] = []
        for run in range(draw(st.integers(1, 2))):
            events += draw(run_events(f"r-{run}"))
        for event in events:
            n = next(ids)
            event["id"] = f"e{n}"
            event["ts"] = (T0 + timedelta(milliseconds=n)).isoformat()
        out.append((worker, events))
    return out


def _cut(draw: st.DrawFn, events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    points = sorted(draw(st.sets(st.integers(1, max(1, len(events) - 1)), max_size=4)))
    bounds = [0, *points, len(events)]
    return [events[a:b] for a, b in itertools.pairwise(bounds) if events[a:b]]


def _snapshot() -> dict[str, Any]:
    def rows(model: Any, *fields: str) -> list[tuple[Any, ...]]:
        return sorted(model.objects.values_list(*fields), key=repr)

    return {
        "runs": rows(
            Run, "worker__worker_id", "run_id", "status", "degraded", "steps", "model_calls",
            "model_spend_usd", "input_tokens", "tool_calls", "tool_attempts", "tool_failures",
            "finished_at", "duration_ms",
        ),
        "tool_calls": rows(
            ToolCall, "worker__worker_id", "run__run_id", "event_id", "tool", "outcome", "attempts"
        ),
        "model_calls": rows(ModelCall, "run__worker__worker_id", "event_id", "cost_usd"),
        "transitions": rows(
            ReportedTransition, "worker__worker_id", "run__run_id", "event_id", "scope", "tool"
        ),
        "ledger": IngestedEvent.objects.count(),
    }  # fmt: skip


def _fleet() -> dict[str, tuple[str, str]]:
    tools = fleet_state().as_json()["tools"]
    return {name: (tool["state"], tool["reason"]) for name, tool in tools.items()}


def _reset(client: redis.Redis) -> None:
    for model in (ToolCall, ModelCall, ReportedTransition, IngestedEvent, FleetBacklog):
        model.objects.all().delete()
    Run.objects.all().delete()
    Worker.objects.all().delete()
    Incident.objects.all().delete()
    FleetTransition.objects.all().delete()
    Tool.objects.all().delete()
    client.flushdb()


def _deliver_until_settled(batches: list[tuple[str, list[dict[str, Any]]]]) -> None:
    # An event whose run.started has not arrived yet is rejected (and leaves no trace): the
    # agent's SDK resends it later, as this loop does, until nothing is rejected.
    for _ in range(len(batches) + 1):
        if not any(
            ingest_batch(worker_id=worker, events=events).rejected for worker, events in batches
        ):
            return
    raise AssertionError("events were still rejected after every batch was resent")


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(stream=streams(), data=st.data())
def test_any_cut_and_resend_gives_the_rows_and_fleet_state_of_one_batch(
    writer: str, redis_client: redis.Redis, stream: Any, data: st.DataObject
) -> None:
    _reset(redis_client)
    for worker, events in stream:
        ingest_batch(worker_id=worker, events=events)
    expected_rows, expected_fleet = _snapshot(), _fleet()

    _reset(redis_client)
    batches = [(worker, batch) for worker, events in stream for batch in _cut(data.draw, events)]
    in_order = data.draw(st.booleans(), label="new batches keep their order")
    if not in_order:
        batches = data.draw(st.permutations(batches), label="delivery order")
    sent: list[tuple[str, list[dict[str, Any]]]] = []
    for batch in batches:
        ingest_batch(worker_id=batch[0], events=batch[1])
        sent.append(batch)
        if data.draw(st.booleans(), label="resend an earlier batch"):
            worker, events = data.draw(st.sampled_from(sent), label="which")
            ingest_batch(worker_id=worker, events=events)  # a timeout's resend: duplicates
    _deliver_until_settled(batches)

    assert _snapshot() == expected_rows
    if in_order:  # the fleet counts consecutive outcomes: its state follows arrival order
        assert _fleet() == expected_fleet
