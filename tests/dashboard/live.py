"""Drive the real fleet: events go through the ingest service, so Redis counts them and the
fleet breaker opens exactly as it does for agents (no rows or Redis keys written by hand)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from runs.services import IngestResult, ingest_batch

_ids = itertools.count(1)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def event_id(prefix: str = "ev") -> str:
    return f"{prefix}-live-{next(_ids)}"


def run_started(
    run_id: str, *, agent: str = "research", at: datetime | None = None
) -> dict[str, Any]:
    return {
        "id": event_id("rs"),
        "type": "run.started",
        "ts": iso(at or timezone.now()),
        "run_id": run_id,
        "agent": agent,
        "step_budget": 20,
    }


def tool_call(
    run_id: str, tool: str, outcome: str, *, step: int = 1, at: datetime | None = None
) -> dict[str, Any]:
    failed = outcome == "retryable"
    return {
        "id": event_id("tc"),
        "type": "tool.call",
        "ts": iso(at or timezone.now()),
        "run_id": run_id,
        "step": step,
        "tool": tool,
        "outcome": outcome,
        "attempts": 5 if failed else 1,
        "duration_ms": 31_000 if failed else 400,
        "error": "ToolFailure: 503 from vendor" if failed else "",
    }


def send(worker_id: str, *events: dict[str, Any]) -> IngestResult:
    result = ingest_batch(worker_id=worker_id, events=list(events))
    assert not result.rejected, result.rejected
    return result


def run_finished(
    run_id: str, *, at: datetime | None = None, degraded: bool = False
) -> dict[str, Any]:
    return {
        "id": event_id("rf"),
        "type": "run.finished",
        "ts": iso(at or timezone.now()),
        "run_id": run_id,
        "status": "completed",
        "degraded": degraded,
        "steps": 3,
    }


def calls(tool: str, worker_id: str, *outcomes: str) -> IngestResult:
    """One finished run on ``worker_id`` that made one call of ``tool`` per outcome."""
    run_id = event_id("r")
    start = timezone.now() - timedelta(seconds=len(outcomes) + 1)
    return send(
        worker_id,
        run_started(run_id, at=start),
        *(
            tool_call(run_id, tool, outcome, step=i + 1, at=start + timedelta(seconds=i + 1))
            for i, outcome in enumerate(outcomes)
        ),
        run_finished(run_id, degraded="retryable" in outcomes),
    )


def open_fleet_breaker(tool: str, *, workers: tuple[str, ...] = ("w-1", "w-2")) -> None:
    """Five retryable failures from two workers: the default policy opens the fleet breaker."""
    for i in range(5):
        calls(tool, workers[i % len(workers)], "retryable")
