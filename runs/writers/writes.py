"""What ingest's database side claims and writes for one batch, whichever database it runs on
(``runs.writers``), and the ``BatchWriter`` protocol both writers follow."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

__all__ = (
    "EVENT_ID_OF",
    "MODEL_CALL_FIELDS",
    "TOOL_CALL_FIELDS",
    "TOTAL_FIELDS",
    "TRANSITION_FIELDS",
    "BatchWriter",
    "Claim",
    "Finish",
    "KnownRun",
    "NewRun",
    "RunUpdate",
    "Totals",
    "WriteConflict",
    "Writes",
    "ledger_key",
)


class WriteConflict(Exception):
    """A concurrent transaction started or finished a run this batch was writing: the batch must
    be rolled back as a whole and can be resent."""


@dataclass(frozen=True, slots=True)
class KnownRun:
    pk: int
    run_id: str
    started_at: datetime
    finished: bool
    totals: Totals


@dataclass(frozen=True, slots=True)
class Claim:
    worker_pk: int
    new_event_ids: set[str]
    runs: dict[str, KnownRun]  # this worker's runs named by the batch


def ledger_key(worker_pk: int, event_id: str) -> str:
    """Event ids are unique per worker (per token and worker id), so the ledger keys them so."""
    return f"{worker_pk}:{event_id}"


# The event id of a ledger row, cut from its key by the database (``RETURNING``), so that the
# claim does not cut one string per new event in Python.
EVENT_ID_OF = "substr(event_id, length(CAST(worker_id AS TEXT)) + 2)"


@dataclass(frozen=True, slots=True)
class Finish:
    status: str
    degraded: bool
    steps: int | None
    finished_at: datetime
    duration_ms: int


@dataclass(slots=True)
class Totals:
    model_calls: int = 0
    model_spend_usd: Decimal = Decimal(0)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_input_tokens: int = 0
    unpriced_calls: int = 0
    tool_calls: int = 0
    tool_attempts: int = 0
    tool_failures: int = 0

    def as_tuple(self) -> tuple[Any, ...]:
        return (
            self.model_calls, self.model_spend_usd, self.input_tokens, self.output_tokens,
            self.cache_read_tokens, self.cache_write_tokens, self.cache_input_tokens,
            self.unpriced_calls, self.tool_calls, self.tool_attempts, self.tool_failures,
        )  # fmt: skip


TOTAL_FIELDS = (
    "model_calls", "model_spend_usd", "input_tokens", "output_tokens", "cache_read_tokens",
    "cache_write_tokens", "cache_input_tokens", "unpriced_calls", "tool_calls", "tool_attempts",
    "tool_failures",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class NewRun:
    run_id: str
    agent: str
    step_budget: int | None
    started_at: datetime
    totals: Totals
    finish: Finish | None


@dataclass(frozen=True, slots=True)
class RunUpdate:
    pk: int
    run_id: str
    totals: Totals
    finish: Finish | None


# Child rows name their run by run_id (the writer resolves it); the worker is the batch's.
TOOL_CALL_FIELDS = (
    "event_id", "run_key", "ts", "step", "tool", "outcome", "attempts", "duration_ms", "error",
)  # fmt: skip
MODEL_CALL_FIELDS = (
    "event_id", "run_key", "ts", "step", "model", "input_tokens", "output_tokens",
    "cache_read_tokens", "cache_write_tokens", "cost_usd", "cost_source", "problem", "duration_ms",
)  # fmt: skip
TRANSITION_FIELDS = ("event_id", "run_key", "ts", "scope", "tool", "state", "reason")
ToolCallRow = tuple[str, str, datetime, int | None, str, str, int, int | None, str]
ModelCallRow = tuple[
    str,
    str,
    datetime,
    int | None,
    str,
    int,
    int,
    int | None,
    int | None,
    Decimal,
    str,
    str,
    int | None,
]
TransitionRow = tuple[str, str | None, datetime, str, str, str, str]


@dataclass(slots=True)
class Writes:
    release_event_ids: list[str] = field(default_factory=list)
    new_runs: list[NewRun] = field(default_factory=list)
    run_updates: list[RunUpdate] = field(default_factory=list)
    tool_calls: list[ToolCallRow] = field(default_factory=list)
    model_calls: list[ModelCallRow] = field(default_factory=list)
    transitions: list[TransitionRow] = field(default_factory=list)
    dropped_events: int = 0  # reported by the client, added to the worker's count
    known_run_pks: dict[str, int] = field(default_factory=dict)  # run_id -> pk, from the claim


class BatchWriter(Protocol):
    def claim(
        self,
        *,
        token_key: int,
        worker_id: str,
        now: datetime,
        event_ids: Sequence[str],
        run_ids: Sequence[str],
        lock_timeout_ms: int,
        statement_timeout_ms: int,
    ) -> Claim: ...

    def write(self, writes: Writes, *, worker_pk: int) -> None: ...
