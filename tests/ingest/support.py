"""Helpers for the ingest tests (the fixtures that use them are in this package's conftest): made-up
events and the type of the ``post_batch`` fixture."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

T0 = datetime(2026, 11, 29, 9, 12, 4, tzinfo=UTC)
EVENTS_URL = "/api/v1/events"

_ids = itertools.count(1)


def iso(offset_s: float = 0) -> str:
    return (T0 + timedelta(seconds=offset_s)).isoformat().replace("+00:00", "Z")


def event(kind: str, **fields: Any) -> dict[str, Any]:
    """A valid event of ``kind`` with made-up defaults; ``fields`` override them."""
    base: dict[str, Any] = {"id": f"ev-{next(_ids)}", "type": kind, "ts": iso()}
    defaults: dict[str, dict[str, Any]] = {
        "run.started": {"run_id": "r-1", "agent": "research", "step_budget": 20},
        "model.call": {
            "run_id": "r-1",
            "step": 1,
            "model": "gpt-test",
            "input_tokens": 5200,
            "output_tokens": 310,
            "cost_usd": 0.061,
            "duration_ms": 2300,
        },
        "tool.call": {
            "run_id": "r-1",
            "step": 1,
            "tool": "web_search",
            "outcome": "retryable",
            "attempts": 5,
            "duration_ms": 31000,
            "error": "ToolFailure: 503 from vendor",
        },
        "breaker.transition": {
            "run_id": "r-1",
            "scope": "run",
            "tool": "web_search",
            "state": "open",
            "reason": "5 consecutive retryable failures",
        },
        "run.finished": {"run_id": "r-1", "status": "completed", "degraded": True, "steps": 9},
    }
    return base | defaults.get(kind, {}) | fields


PostBatch = Callable[..., Any]
