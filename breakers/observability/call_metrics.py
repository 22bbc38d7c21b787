"""Prometheus counters that the web processes change (multiprocess files under gunicorn).

Names follow resilience4j's, which users already graph: a tool is a circuit breaker ``name``;
``kind`` is ``successful``, ``failed`` (retryable or degraded: both count) or ``ignored``
(semantic: not counted by the breaker); blocked calls are ``not_permitted``. Counted when the
fleet hook receives them, which ingest calls after its transaction committed with the new events
only: each call is counted once. (A backlog replay after a Redis failure runs in Celery, whose
counters are not exported.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import Counter, Histogram

from runs.fleet_interface import AcceptedToolCall

__all__ = (
    "CALLS",
    "INGEST_BATCHES",
    "INGEST_BATCH_SECONDS",
    "INGEST_EVENTS",
    "NOT_PERMITTED",
    "count_ingest_batch",
    "count_ingest_events",
    "count_tool_calls",
)

CALLS = Counter(
    "resilience4j_circuitbreaker_calls",
    "Tool calls reported by agents, by kind "
    "(successful, failed = retryable or degraded, ignored = semantic)",
    ["name", "kind"],
)
NOT_PERMITTED = Counter(
    "resilience4j_circuitbreaker_not_permitted_calls",
    "Tool calls a breaker refused without reaching the vendor (outcome blocked)",
    ["name"],
)
INGEST_EVENTS = Counter(
    "breakerpanel_ingest_events",
    "Events in ingest batches by result: accepted, duplicate (already applied), rejected",
    ["result"],
)
INGEST_BATCHES = Counter("breakerpanel_ingest_batches", "Ingest batches by HTTP status", ["status"])
INGEST_BATCH_SECONDS = Histogram(
    "breakerpanel_ingest_batch_duration_seconds",
    "Time to answer one POST /api/v1/events",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

_KIND = {
    "success": "successful",
    "retryable": "failed",
    "degraded": "failed",  # counted like retryable; resilience4j has no other word for it
    "semantic": "ignored",
}

# Labelled children, looked up once each: ``labels()`` checks and joins its arguments on every
# call, which ingest would pay several times a batch. (A child keeps working across a fork: its
# value notices the new pid, as in prometheus_client's multiprocess mode.)
_ACCEPTED = INGEST_EVENTS.labels(result="accepted")
_DUPLICATE = INGEST_EVENTS.labels(result="duplicate")
_REJECTED = INGEST_EVENTS.labels(result="rejected")
_BATCHES: dict[int, Any] = {}
_CALL_CHILDREN: dict[tuple[str, str], Any] = {}


def count_ingest_batch(status: int) -> None:
    child = _BATCHES.get(status)
    if child is None:
        child = _BATCHES.setdefault(status, INGEST_BATCHES.labels(status=str(status)))
    child.inc()


def count_ingest_events(*, accepted: int, duplicates: int, rejected: int) -> None:
    _ACCEPTED.inc(accepted)
    _DUPLICATE.inc(duplicates)
    _REJECTED.inc(rejected)


def count_tool_calls(calls: Iterable[AcceptedToolCall]) -> None:
    tally: dict[tuple[str, str], int] = {}
    for call in calls:
        key = (call.tool, call.outcome)
        tally[key] = tally.get(key, 0) + 1
    for key, n in tally.items():
        child = _CALL_CHILDREN.get(key)
        if child is None:
            child = _CALL_CHILDREN.setdefault(key, _call_child(*key))
        if child is not None:
            child.inc(n)


def _call_child(tool: str, outcome: str) -> Any:
    if outcome == "blocked":
        return NOT_PERMITTED.labels(name=tool)
    kind = _KIND.get(outcome)
    return CALLS.labels(name=tool, kind=kind) if kind else None
