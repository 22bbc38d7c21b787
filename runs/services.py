"""Ingest: check a batch of agent events and apply each new one exactly once.

One batch is one transaction. Its first write claims the event ids in the dedupe ledger with
``INSERT ... ON CONFLICT (event_id) DO NOTHING RETURNING event_id``: the ids that come back are new
and are applied; the others were applied by an earlier request and are counted as duplicates. A
concurrent resend of the same ids waits on the first transaction's uncommitted ledger rows and then
sees them as duplicates, so a batch resent after a timeout, a 5xx or a crash between commit and
reply changes nothing the second time. Everything an event touches (its row, its run's totals and,
through the fleet updater (``runs.ingest_fleet``), the fleet counters) is keyed by that one claim.

Events are rejected one by one with a reason a person can act on; the valid events of the same
batch are kept. A rejected event writes nothing, not even its ledger row, so it can be fixed and
sent again with the same id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from runs.batch_checks import (
    BatchRefused,
    DropReport,
    Event,
    Rejection,
    validate_events,
)
from runs.fleet_interface import AcceptedModelCall, AcceptedToolCall
from runs.ingest_fleet import (
    apply_fleet_outcomes,
    fleet_identity,
    fleet_lease_holder,
    fleet_ready,
    fleet_state_for_reply,
)
from runs.models import AgentToken, CostSource, IngestedEvent, Outcome
from runs.pricing import price_call, usage_problem
from runs.schemas import (
    MAX_COST_USD,
    MAX_COUNT,
    BreakerTransitionEvent,
    ModelCallEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallEvent,
)
from runs.writers import (
    Claim,
    Finish,
    NewRun,
    RunUpdate,
    Totals,
    WriteConflict,
    Writes,
    batch_writer,
    ledger_key,
)

__all__ = (
    "CommitUnknown",
    "IngestConflict",
    "IngestResult",
    "TokenMismatch",
    "check_bound_worker",
    "ingest_batch",
)

logger = logging.getLogger(__name__)


_FAILED_OUTCOMES = frozenset(
    {Outcome.RETRYABLE.value, Outcome.SEMANTIC.value, Outcome.DEGRADED.value}
)
_MICRO_USD = Decimal("0.000001")
MAX_BIGINT = 9_223_372_036_854_775_807
_MAX_CALL_USD = Decimal(MAX_COST_USD)


class CommitUnknown(OperationalError):
    """The database did not acknowledge the batch's commit and could not be asked whether it
    landed: the batch may be stored. A resend is safe (its events come back as duplicates, and
    their tool calls reach the fleet counters if they had not)."""


class IngestConflict(Exception):
    """A concurrent batch changed a run this one was applying; the whole batch was rolled back
    and resending it is safe (the API answers 503 with a short Retry-After)."""


@dataclass(slots=True)
class IngestResult:
    accepted: int
    duplicates: int
    rejected: list[Rejection]
    fleet: dict[str, Any]

    def as_reply(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "rejected": [
                {"index": r.index, "id": r.event_id, "reason": r.reason} for r in self.rejected
            ],
            "fleet": self.fleet,
        }


# ---------------------------------------------------------------------------------------------
# Applying a batch
# ---------------------------------------------------------------------------------------------


# What a run's totals may reach: the columns' limits (runs.models.Run).
_TOTAL_LIMITS = Totals(
    model_calls=MAX_COUNT,
    model_spend_usd=Decimal("99999999.999999"),
    input_tokens=MAX_BIGINT,
    output_tokens=MAX_BIGINT,
    cache_read_tokens=MAX_BIGINT,
    cache_write_tokens=MAX_BIGINT,
    cache_input_tokens=MAX_BIGINT,
    unpriced_calls=MAX_COUNT,
    tool_calls=MAX_COUNT,
    tool_attempts=MAX_COUNT,
    tool_failures=MAX_COUNT,
)


def _room(stored: Totals) -> Totals:
    """How much each total may still grow: its column's limit less what the database holds."""
    pairs = zip(_TOTAL_LIMITS.as_tuple(), stored.as_tuple(), strict=True)
    return Totals(*(limit - held for limit, held in pairs))


@dataclass(slots=True)
class _RunRef:
    """A run this batch touches: loaded from the database or started by this batch."""

    run_id: str
    pk: int | None
    started_at: datetime
    finished: bool
    # What this batch may add to each total before its column overflows (never changed): each
    # event is checked with plain comparisons, as this runs per event.
    room: Totals
    started_by: RunStartedEvent | None = None
    finished_by: RunFinishedEvent | None = None
    totals: Totals = field(default_factory=Totals)  # what this batch adds


@dataclass(slots=True)
class _Plan:
    worker_pk: int
    runs: dict[str, _RunRef]
    rejected: list[Rejection]
    writes: Writes
    fleet_calls: list[AcceptedToolCall]
    ledger_prefix: str = ""  # ledger_key(worker_pk, ""): this worker's part of every ledger key
    # The batch's new model calls, for the fleet's spend rule.
    model_calls: list[AcceptedModelCall] = field(default_factory=list)


class TokenMismatch(BatchRefused):
    """A token bound to one worker sent a batch for another (403)."""

    def __init__(self, bound: str, sent: str) -> None:
        super().__init__(f"this token is bound to worker {bound!r}, not {sent!r}", status=403)


def check_bound_worker(*, token: AgentToken | None, worker_id: str) -> None:
    """Raise ``TokenMismatch`` if ``token`` is bound to another worker id."""
    if token is not None and token.worker_id and token.worker_id != worker_id:
        raise TokenMismatch(token.worker_id, worker_id)


def ingest_batch(
    *,
    worker_id: str,
    events: Sequence[Any],
    token: AgentToken | None = None,
    dropped: DropReport | None = None,
    now: datetime | None = None,
    may_hold_nulls: bool = True,
    before_commit: Callable[[], None] | None = None,
) -> IngestResult:
    """Apply a batch from one worker: every valid, new event once; report the rest.

    ``token`` is the agent token the batch came with (None only for callers inside the control
    plane): event ids and run ids are scoped by token and worker id. The database commits first;
    the fleet breaker in Redis is updated after the commit, so it never counts an event whose
    rows were rolled back. ``before_commit`` runs last inside the batch's transaction, for writes
    that must land with the batch or not at all (the OTLP receiver's run corrections).
    """
    check_bound_worker(token=token, worker_id=worker_id)
    now = now or timezone.now()
    who = _FleetWho(
        voter=fleet_identity(worker_id=worker_id, token=token),
        holder=fleet_lease_holder(worker_id=worker_id, token=token),
    )
    valid, rejected = validate_events(events, may_hold_nulls=may_hold_nulls)
    # Fail before writing anything while the fleet store is unreachable (503, resend later).
    if any(isinstance(event, ToolCallEvent) for _, event in valid):
        fleet_ready()
    claim_ids = [event.id for _, event in valid]
    if dropped is not None:
        claim_ids.append(dropped.report_id)
    writer = batch_writer()
    committing = False
    try:
        # Durable: this is the outermost transaction, so the fleet update that follows it comes
        # after a real commit (tests' per-test transactions excepted).
        with transaction.atomic(durable=True):
            claim = writer.claim(
                token_key=token.pk if token is not None else 0,
                worker_id=worker_id,
                now=now,
                # Sorted, so two batches that share ids lock ledger rows in the same order.
                event_ids=sorted(claim_ids),
                run_ids=sorted({e.run_id for _, e in valid if e.run_id is not None}),
                lock_timeout_ms=settings.INGEST_LOCK_TIMEOUT_MS,
                statement_timeout_ms=settings.INGEST_STATEMENT_TIMEOUT_MS,
            )
            fresh = [(index, event) for index, event in valid if event.id in claim.new_event_ids]
            plan = _plan(fresh, claim=claim, who=who)
            if dropped is not None and dropped.report_id in claim.new_event_ids:
                plan.writes.dropped_events = dropped.count
            rejected.extend(plan.rejected)
            writer.write(plan.writes, worker_pk=claim.worker_pk)
            if before_commit is not None:
                before_commit()
            committing = True
    except WriteConflict as exc:
        raise IngestConflict(str(exc)) from exc
    except (OperationalError, InterfaceError) as exc:
        # The COMMIT was sent but its answer lost: ask again on a new connection.
        if not committing or not _commit_landed(claim, fresh):
            raise
        logger.warning("ingest commit was not acknowledged but landed: %s", exc)
    resent, resent_models = _resent_calls(valid, claim=claim, who=who, now=now)
    apply_fleet_outcomes(
        tool_calls=[*plan.fleet_calls, *resent], model_calls=[*plan.model_calls, *resent_models]
    )
    rejected.sort(key=lambda r: r.index)
    return IngestResult(
        accepted=len(fresh) - len(plan.rejected),
        duplicates=len(valid) - len(fresh),
        rejected=rejected,
        fleet=fleet_state_for_reply(),
    )


def _commit_landed(claim: Claim, fresh: list[tuple[int, Event]]) -> bool:
    """Whether a commit whose acknowledgement was lost is stored: the ledger rows it claimed are
    there (all or none: one transaction).

    False when it claimed no new event; ``CommitUnknown`` when the database cannot be asked.
    """
    if not fresh:
        return False
    claimed = [ledger_key(claim.worker_pk, event.id) for _, event in fresh]
    try:
        connection.close()  # the broken one; the query below opens a new one
        return IngestedEvent.objects.filter(event_id__in=claimed).exists()
    except DatabaseError as exc:
        raise CommitUnknown(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class _FleetWho:
    """Whom a batch's tool calls count for (the quorum's voter) and who made them (the trial
    lease's holder): the two differ for workers sharing an unbound token."""

    voter: str
    holder: str

    def tool_call(
        self, event: ToolCallEvent, *, dedupe_id: str, run_key: str, resent: bool = False
    ) -> AcceptedToolCall:
        """``event`` as the fleet store takes it, counted for this batch's voter and holder."""
        return AcceptedToolCall(
            event_id=event.id,
            ts=event.ts,
            worker_id=self.voter,
            holder=self.holder,
            run_id=event.run_id,
            tool=event.tool,
            outcome=event.outcome,
            attempts=_attempts(event),
            error=event.error,
            trial=event.trial,
            dedupe_id=dedupe_id,
            resent=resent,
            run_key=run_key,
        )

    def model_call(
        self, event: ModelCallEvent, *, cost: Decimal, dedupe_id: str, run_key: str
    ) -> AcceptedModelCall:
        """``event`` as the fleet's spend rule takes it, at ``cost``, the one it was stored with
        (the reported one, or the table's; an unknown price counts 0, as in the run's spend)."""
        return AcceptedModelCall(
            event_id=event.id,
            ts=event.ts,
            voter=self.voter,
            run_key=run_key,
            cost_usd=float(cost),
            dedupe_id=dedupe_id,
        )


def _resent_calls(
    valid: list[tuple[int, Event]], *, claim: Claim, who: _FleetWho, now: datetime
) -> tuple[list[AcceptedToolCall], list[AcceptedModelCall]]:
    """The tool (and model) calls of a resend that were stored before, for the fleet store,
    which counts each event id once: those a lost commit acknowledgement kept from the fleet
    are counted now, the others are recognised and change nothing. Only calls first stored
    within the store's memory (``BREAKER_DEDUPE_TTL_SECONDS``, by the ledger's server-side time)
    are handed on, so none is counted twice. One query, only for a batch that resends calls."""
    resent: dict[str, ToolCallEvent | ModelCallEvent] = {
        ledger_key(claim.worker_pk, event.id): event
        for _, event in valid
        if isinstance(event, ToolCallEvent | ModelCallEvent) and event.id not in claim.new_event_ids
    }
    if not resent:
        return [], []
    remembered_since = now - timedelta(seconds=settings.BREAKER_DEDUPE_TTL_SECONDS)
    recent = set(
        IngestedEvent.objects.filter(
            event_id__in=resent, received_at__gt=remembered_since
        ).values_list("event_id", flat=True)
    )
    tools: list[AcceptedToolCall] = []  # in the batch's order: outcomes count in sequence
    models: list[AcceptedModelCall] = []
    for key, event in resent.items():
        if key not in recent:
            continue
        run_key = ledger_key(claim.worker_pk, event.run_id)
        if isinstance(event, ToolCallEvent):
            tools.append(who.tool_call(event, dedupe_id=key, run_key=run_key, resent=True))
        else:
            cost = _priced_call(event).cost
            models.append(who.model_call(event, cost=cost, dedupe_id=key, run_key=run_key))
    return tools, models


def _plan(fresh: list[tuple[int, Event]], *, claim: Claim, who: _FleetWho) -> _Plan:
    """Resolve each new event's run, reject those that name an unknown run or would overflow
    its totals, and turn the rest into rows and run totals.

    Every event only adds to its run's totals (no amount is negative), so if no run's totals
    pass their columns' limits at the end of the batch, none did after any event: the events
    are added without a check each, and only a batch where a run ends past a limit is planned
    again, event by event, to refuse exactly the events past it.
    """
    plan = _plan_events(fresh, claim=claim, who=who, checked=False)
    if any(_past_limit(ref) for ref in plan.runs.values()):
        plan = _plan_events(fresh, claim=claim, who=who, checked=True)
    return plan


def _past_limit(ref: _RunRef) -> bool:
    totals, room = ref.totals, ref.room
    return (
        totals.model_calls > room.model_calls
        or totals.model_spend_usd > room.model_spend_usd
        or totals.input_tokens > room.input_tokens
        or totals.output_tokens > room.output_tokens
        or totals.tool_calls > room.tool_calls
        or totals.tool_attempts > room.tool_attempts
        or totals.tool_failures > room.tool_failures
    )


def _plan_events(
    fresh: list[tuple[int, Event]], *, claim: Claim, who: _FleetWho, checked: bool
) -> _Plan:
    runs = {
        run.run_id: _RunRef(run.run_id, run.pk, run.started_at, run.finished, _room(run.totals))
        for run in claim.runs.values()
    }
    plan = _Plan(
        worker_pk=claim.worker_pk,
        runs=runs,
        rejected=[],
        writes=Writes(),
        fleet_calls=[],
        ledger_prefix=ledger_key(claim.worker_pk, ""),
    )
    plan.writes.known_run_pks = {run.run_id: run.pk for run in claim.runs.values()}

    # Runs first, so that the other events of a run may come before its run.started in a batch.
    for index, event in fresh:
        if not isinstance(event, RunStartedEvent):
            continue
        if event.run_id in runs:
            plan.rejected.append(
                Rejection(index, event.id, f"run {event.run_id!r} was already started")
            )
            continue
        runs[event.run_id] = _RunRef(
            event.run_id, None, event.ts, False, _TOTAL_LIMITS, started_by=event
        )

    for index, event in fresh:
        if isinstance(event, RunStartedEvent):
            continue
        ref = runs.get(event.run_id) if event.run_id is not None else None
        if event.run_id is not None:
            reason = _refuse_reference(ref, event)
            if reason is not None:
                plan.rejected.append(Rejection(index, event.id, reason))
                continue
        reason = _add(ref, event, plan, who=who, checked=checked)
        if reason is not None:
            plan.rejected.append(Rejection(index, event.id, reason))

    # Events rejected after their id was claimed leave no trace, so a fixed resend is applied.
    plan.writes.release_event_ids = [r.event_id for r in plan.rejected if r.event_id]
    for ref in runs.values():
        finish = _finish(ref)
        if ref.started_by is not None:
            started = ref.started_by
            plan.writes.new_runs.append(
                NewRun(
                    ref.run_id, started.agent, started.step_budget, started.ts, ref.totals, finish
                )
            )
        elif ref.pk is not None and (finish is not None or ref.totals != Totals()):
            plan.writes.run_updates.append(RunUpdate(ref.pk, ref.run_id, ref.totals, finish))
    return plan


def _refuse_reference(ref: _RunRef | None, event: Event) -> str | None:
    run_id = event.run_id
    if ref is None:
        # Run ids are this worker's own: another worker's run of the same id is not this one.
        return (
            f"unknown run_id {run_id!r} for this worker: send its run.started first "
            "(earlier or in this batch)"
        )
    if isinstance(event, RunFinishedEvent) and ref.finished:
        return f"run {run_id!r} has already finished"
    return None


def _add(
    ref: _RunRef | None, event: Event, plan: _Plan, *, who: _FleetWho, checked: bool
) -> str | None:
    """Count an accepted event towards its run and queue its row; or say why it cannot be
    (``checked``: whether its run's totals would pass a limit; see ``_plan``)."""
    writes = plan.writes
    if isinstance(event, BreakerTransitionEvent):
        writes.transitions.append(
            (event.id, event.run_id, event.ts, event.scope, event.tool, event.state, event.reason)
        )
        return None
    assert ref is not None  # every other event type names a run, checked above
    if isinstance(event, RunFinishedEvent):
        ref.finished = True
        ref.finished_by = event
    elif isinstance(event, ModelCallEvent):
        call = _priced_call(event)
        totals, room = ref.totals, ref.room
        model_calls = totals.model_calls + 1
        spend = totals.model_spend_usd + call.cost
        input_tokens = totals.input_tokens + call.input_tokens
        output_tokens = totals.output_tokens + call.output_tokens
        if checked and (
            model_calls > room.model_calls
            or spend > room.model_spend_usd
            or input_tokens > room.input_tokens
            or output_tokens > room.output_tokens
        ):
            return _overflow_reason(
                ref, model_calls=model_calls, model_spend_usd=spend,
                input_tokens=input_tokens, output_tokens=output_tokens,
            )  # fmt: skip
        totals.model_calls = model_calls
        totals.model_spend_usd = spend
        totals.input_tokens = input_tokens
        totals.output_tokens = output_tokens
        # Each of these grows by at most MAX_CALL_TOKENS (or 1) per call, far below its room
        # while input_tokens (which they are parts of) stays below its own.
        totals.cache_read_tokens += call.cache_read_tokens or 0
        totals.cache_write_tokens += call.cache_write_tokens or 0
        if call.cache_read_tokens is not None or call.cache_write_tokens is not None:
            totals.cache_input_tokens += call.input_tokens
        totals.unpriced_calls += call.source == CostSource.UNKNOWN
        writes.model_calls.append((
            event.id, ref.run_id, event.ts, event.step, event.model, call.input_tokens,
            call.output_tokens, call.cache_read_tokens, call.cache_write_tokens, call.cost,
            call.source, call.problem, event.duration_ms,
        ))  # fmt: skip
        plan.model_calls.append(
            who.model_call(
                event,
                cost=call.cost,
                dedupe_id=plan.ledger_prefix + event.id,
                run_key=plan.ledger_prefix + ref.run_id,
            )
        )
    elif isinstance(event, ToolCallEvent):
        attempts = _attempts(event)
        totals, room = ref.totals, ref.room
        tool_calls = totals.tool_calls + 1
        tool_attempts = totals.tool_attempts + attempts
        tool_failures = totals.tool_failures + (event.outcome in _FAILED_OUTCOMES)
        if checked and (
            tool_calls > room.tool_calls
            or tool_attempts > room.tool_attempts
            or tool_failures > room.tool_failures
        ):
            return _overflow_reason(
                ref, tool_calls=tool_calls, tool_attempts=tool_attempts,
                tool_failures=tool_failures,
            )  # fmt: skip
        totals.tool_calls = tool_calls
        totals.tool_attempts = tool_attempts
        totals.tool_failures = tool_failures
        writes.tool_calls.append((
            event.id, ref.run_id, event.ts, event.step, event.tool, event.outcome, attempts,
            event.duration_ms, event.error,
        ))  # fmt: skip
        # dedupe_id: ledger_key(worker_pk, event.id), its prefix computed once per batch
        plan.fleet_calls.append(
            who.tool_call(
                event,
                dedupe_id=plan.ledger_prefix + event.id,
                run_key=plan.ledger_prefix + ref.run_id,
            )
        )
    return None


def _overflow_reason(ref: _RunRef, **sums: int | Decimal) -> str:
    """Name the first total (in the order given) that would pass its column's limit."""
    total = next(name for name, value in sums.items() if value > getattr(ref.room, name))
    limit = getattr(_TOTAL_LIMITS, total)
    return f"run {ref.run_id!r} would exceed the limit of its {total} ({limit}); start a new run"


def _usd(cost: float) -> Decimal:
    return Decimal(repr(cost)).quantize(_MICRO_USD)


@dataclass(frozen=True, slots=True)
class _PricedCall:
    """A model call as stored: token counts that cannot be trusted are 0 and ``problem`` says
    why; a call without a cost is priced from the table, or stored as unknown (0, marked)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cost: Decimal
    source: str
    problem: str


def _priced_call(event: ModelCallEvent) -> _PricedCall:
    counts = (
        event.input_tokens,
        event.output_tokens,
        event.cache_read_tokens,
        event.cache_write_tokens,
    )
    problem = usage_problem(*counts)
    if event.cost_usd is not None:
        cost, source = _usd(event.cost_usd), CostSource.REPORTED
        note = f"token counts unusable: {problem}" if problem else ""
    else:
        price = price_call(
            model=event.model,
            provider=event.provider,
            input_tokens=event.input_tokens,
            output_tokens=event.output_tokens,
            cache_read_tokens=event.cache_read_tokens,
            cache_write_tokens=event.cache_write_tokens,
        )
        if price.usd is None or price.usd > _MAX_CALL_USD:
            cost, source = Decimal(0), CostSource.UNKNOWN
            note = price.problem or "not priced: more than one call's cost can be"
        else:
            cost, source, note = price.usd.quantize(_MICRO_USD), CostSource.TABLE, ""
    if problem:
        return _PricedCall(0, 0, None, None, cost, source, note)
    return _PricedCall(
        event.input_tokens or 0, event.output_tokens or 0, event.cache_read_tokens,
        event.cache_write_tokens, cost, source, note,
    )  # fmt: skip


def _attempts(event: ToolCallEvent) -> int:
    if event.attempts is not None:
        return event.attempts
    return 0 if event.outcome == Outcome.BLOCKED else 1


def _finish(ref: _RunRef) -> Finish | None:
    event = ref.finished_by
    if event is None:
        return None
    # Agent clocks are not ours: a finish stamped before the start counts as zero, not negative.
    duration_ms = max(0, int((event.ts - ref.started_at).total_seconds() * 1000))
    return Finish(event.status, event.degraded, event.steps, event.ts, duration_ms)
