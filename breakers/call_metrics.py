"""Prometheus counters that the web processes change (multiprocess files under gunicorn).

Names follow resilience4j's, which users already graph: a tool is a circuit breaker ``name``;
``kind`` is ``successful``, ``failed`` (retryable) or ``ignored`` (semantic: not counted by the
breaker); blocked calls are ``not_permitted``. Counted when the fleet hook receives them, which
ingest calls after its transaction committed with the new events only: each call is counted
once. (A backlog replay after a Redis failure runs in Celery, whose counters are not exported.)
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable
from typing import Protocol

from prometheus_client import Counter, Histogram

__all__ = ("CALLS", "INGEST_BATCHES", "INGEST_BATCH_SECONDS", "INGEST_EVENTS", "NOT_PERMITTED")

CALLS = Counter(
    "resilience4j_circuitbreaker_calls",
    "Tool calls reported by agents, by kind (successful, failed = retryable, ignored = semantic)",
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

_KIND = {"success": "successful", "retryable": "failed", "semantic": "ignored"}


class _Call(Protocol):
    @property
    def tool(self) -> str: ...
    @property
    def outcome(self) -> str: ...


def count_tool_calls(calls: Iterable[_Call]) -> None:
    for (tool, outcome), n in Tally((call.tool, call.outcome) for call in calls).items():
        if outcome == "blocked":
            NOT_PERMITTED.labels(name=tool).inc(n)
        elif kind := _KIND.get(outcome):
            CALLS.labels(name=tool, kind=kind).inc(n)
