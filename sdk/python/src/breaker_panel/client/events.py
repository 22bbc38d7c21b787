"""The events a plane reports, from what the agent thread buffers to the JSON the server takes.

Recording must stay cheap (bench/bench_sdk.py): a tool call is buffered as one flat tuple and
the sender thread turns it into its event (``materialize``), adding the id and the time stamp.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from breaker_panel.client.ids import process_ids
from breaker_panel.vocabulary import Outcome, Scope, State

# Matches the server's limit (docs/api.md): longer texts would be cut there anyway.
MAX_TEXT_CHARS = 2000

# What the agent thread buffers: (time.time(), event dict without id and ts) or, for a tool
# call, one flat ToolCall tuple. Events taken back after a failed send are already events
# (dicts) and stay as they are.
ToolCall = tuple[float, str, int, str, Outcome, int, "int | None", str, bool]
Recorded = tuple[float, "dict[str, Any]"] | ToolCall


def materialize(item: Recorded | dict[str, Any]) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    if len(item) == 2:
        timestamp, event = item
    else:
        timestamp, run_id, step, tool, outcome, attempts, duration_ms, error, trial = item
        event = {
            "type": "tool.call",
            "run_id": run_id,
            "step": step,
            "tool": tool,
            "outcome": str(outcome),
            "attempts": attempts,
            "duration_ms": duration_ms,
            "error": clip(error),
        }
        if trial:
            # The control plane decides a half-open fleet breaker on this event only: a late
            # call of another run (or worker) must not close or re-open it.
            event["trial"] = True
    event["id"] = process_ids.new()
    event["ts"] = _iso(timestamp)
    return event


def transition_event(
    tool: str, scope: Scope, state: State, reason: str, *, run_id: str | None
) -> dict[str, Any]:
    """A ``breaker.transition`` event (without id and ts)."""
    return {
        "type": "breaker.transition",
        "run_id": run_id,
        "scope": str(scope),
        "tool": tool,
        "state": str(state),
        "reason": clip(reason),
    }


def clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")
