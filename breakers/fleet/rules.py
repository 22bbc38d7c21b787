"""The fleet breaker rules' vocabulary (no Django, no I/O): policy, transition and cause types, the
forced states and operator actions that the Lua scripts in ``breakers/fleet/lua/``, the services
and the pages share. The rules themselves run in Lua; ``tests/fleet/reference_model.py`` restates
them in Python as the tests' oracle (docs/adr/0024-the-fleet-rules-exist-twice-a.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from breaker_panel.vocabulary import State

__all__ = [
    "AGENT_HOLDER_PREFIX",
    "OUT_STATES",
    "PROBE_HOLDER",
    "STREAK_EVENTS_KEPT",
    "CauseKind",
    "FleetPolicy",
    "Forced",
    "NotForcedError",
    "OperatorActionKind",
    "Transition",
    "TrialMode",
    "effective_state",
    "micro_usd",
    "opening_rule",
]

# The event ids kept as the cause of an opening: enough to show every failure of a default
# streak and then some, bounded however long one worker keeps failing alone.
STREAK_EVENTS_KEPT = 100
PROBE_HOLDER = "probe"
AGENT_HOLDER_PREFIX = "agent:"
# States in which the tool is out of the agents' toolsets: an incident is open while in them.
OUT_STATES = frozenset({State.OPEN, State.HALF_OPEN, State.FORCED_OPEN})


class Forced(StrEnum):
    NONE = ""
    OPEN = State.FORCED_OPEN.value
    CLOSED = State.FORCED_CLOSED.value


class TrialMode(StrEnum):
    """Who makes the one half-open trial: a Celery probe, or one agent call holding a lease."""

    PROBE = "probe"
    LEASE = "lease"


class CauseKind(StrEnum):
    FAILURES = "failures"  # closed -> open: the streak that opened it (the consecutive rule)
    SPEND = "spend"  # closed -> open: model spend burned in runs whose calls to it all failed
    COOLDOWN = "cooldown"  # open -> half_open
    TRIAL = "trial"  # half_open -> closed/open: the probe or the agent's trial call
    OPERATOR = "operator"  # force open/close, release, reset
    # Not a rule: Celery's tick found Redis ahead of the database (a transition whose ingest
    # transaction rolled back after Redis had applied it) and recorded the state it found.
    RECONCILE = "reconcile"


class OperatorActionKind(StrEnum):
    FORCE_OPEN = "force_open"
    FORCE_CLOSE = "force_close"
    RELEASE = "release"
    RESET = "reset"


class NotForcedError(Exception):
    """``release()`` of a breaker that is not forced: there is nothing to release."""


_OPENING_RULES = {CauseKind.FAILURES.value: "consecutive", CauseKind.SPEND.value: "spend"}


def opening_rule(kind: str) -> str | None:
    """Which automatic rule a transition of cause ``kind`` opened the tool by: ``"consecutive"``
    or ``"spend"``; None for any other cause (cooldown, trial, operator, reconcile)."""
    return _OPENING_RULES.get(str(kind))


def micro_usd(usd: float) -> int:
    """An amount in whole micro-dollars: the spend rule sums integers in Redis, never floats."""
    return round(usd * 1_000_000)


def effective_state(auto: State, forced: Forced) -> State:
    return State(forced.value) if forced else auto


@dataclass(frozen=True, slots=True)
class FleetPolicy:
    """One tool's rules; defaults come from settings (``BREAKER_*``)."""

    threshold: int = 5
    cooldown_ms: int = 30_000
    max_cooldown_ms: int = 300_000
    min_workers: int = 2
    trial: TrialMode = TrialMode.LEASE
    # The spend rule (docs/adr/0201-spend-rule-off-by-default.md): 0 micro-USD is off.
    spend_amount_micro: int = 0
    spend_window_ms: int = 600_000

    @property
    def spend_amount_usd(self) -> float:
        return self.spend_amount_micro / 1_000_000

    def __post_init__(self) -> None:
        if self.threshold < 1:
            raise ValueError(f"threshold must be at least 1, got {self.threshold}")
        if self.min_workers < 1:
            raise ValueError(f"min_workers must be at least 1, got {self.min_workers}")
        if not 0 < self.cooldown_ms <= self.max_cooldown_ms:
            raise ValueError("need 0 < cooldown <= max cooldown")
        if self.spend_amount_micro < 0 or self.spend_window_ms < 1:
            raise ValueError("the spend rule needs an amount >= 0 and a positive window")


@dataclass(frozen=True, slots=True)
class Transition:
    """One change of a tool's fleet breaker, with what caused it."""

    seq: int
    at: int  # ms since the epoch, the caller's clock
    from_state: State  # effective states
    to_state: State
    auto_from: State
    auto_to: State
    forced: Forced
    kind: CauseKind
    cause: dict[str, Any]
    reason: str  # the effective state's reason after the change
