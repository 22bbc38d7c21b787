"""The one definition of the words agents and the control plane share (contract: docs/api.md).

The server's model choices and ingest schemas are derived from these enums, so a new outcome,
state or scope is added here and nowhere else.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "AUTOMATIC_STATES",
    "COUNTED_OUTCOMES",
    "FINISHED_STATUSES",
    "OUTCOMES",
    "SCOPES",
    "STATES",
    "WAYS",
    "Outcome",
    "RunStatus",
    "Scope",
    "State",
    "Way",
]


class Outcome(StrEnum):
    """What one exhausted tool call came to (contract strings)."""

    SUCCESS = "success"
    RETRYABLE = "retryable"  # transport failure: timeout, connection error, 5xx, 429 after retries
    SEMANTIC = "semantic"  # rejected for its arguments, e.g. a 400: says nothing about health
    DEGRADED = "degraded"  # returned, but the result failed a result check (empty, error body...)
    BLOCKED = "blocked"  # refused by a breaker without reaching the vendor; never counted


class State(StrEnum):
    """Breaker states (contract strings). The forced ones are only ever set by the fleet."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"
    FORCED_OPEN = "forced_open"
    FORCED_CLOSED = "forced_closed"


class Scope(StrEnum):
    """Where a breaker's state lives, so who pays to discover an outage."""

    RUN = "run"
    WORKER = "worker"
    FLEET = "fleet"


class Way(StrEnum):
    """How a lost tool is taken away from the model (contract strings; `breaker_panel.ways`)."""

    REMOVE = "remove"  # the tool leaves the tools array
    RESTRICT = "restrict"  # the array stays; the provider's allowed-tools list forbids it
    REFUSE = "refuse"  # the array stays; a call is answered at once with the notice


class RunStatus(StrEnum):
    """How a run ends (`Run.finish(status=...)`, the `run.finished` event)."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


# Plain strings (not enum members), for Literal types and JSON.
OUTCOMES: tuple[str, ...] = tuple(member.value for member in Outcome)
# The outcomes the consecutive-failure rule counts, in every scope (fleet included).
COUNTED_OUTCOMES: frozenset[Outcome] = frozenset({Outcome.RETRYABLE, Outcome.DEGRADED})
STATES: tuple[str, ...] = tuple(member.value for member in State)
# What a breaker does on its own; the forced states are operator actions on the fleet.
AUTOMATIC_STATES: tuple[str, ...] = (State.CLOSED.value, State.OPEN.value, State.HALF_OPEN.value)
SCOPES: tuple[str, ...] = tuple(member.value for member in Scope)
WAYS: tuple[str, ...] = tuple(member.value for member in Way)
FINISHED_STATUSES: tuple[str, ...] = tuple(member.value for member in RunStatus)
