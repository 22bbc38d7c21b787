"""Apply an OTLP export: map its spans and hand each worker's events to ``ingest_batch``.

The ingest service does the checking, dedupe, exactly-once and the fleet hook, exactly as for
``POST /api/v1/events``. What events cannot say about a run (it came from OTLP, its cost was
estimated, its outermost agent span's name, start and end) is applied inside the ingest's own
transaction, with rules that give the same row whatever order the spans arrive in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.db import DataError, connection

from runs.batch_checks import validate_events
from runs.models import AgentToken, Run, RunSource, RunStatus
from runs.otlp.decode import DecodedExport
from runs.otlp.mapping import (
    MappedExport,
    MappingConfig,
    RunFacts,
    map_spans,
    span_result_checks,
)
from runs.services import TokenMismatch, ingest_batch

__all__ = ("OtlpResult", "ingest_otlp_export", "mapping_config")

_MAX_REASONS = 3
logger = logging.getLogger(__name__)


@dataclass(slots=True)
class OtlpResult:
    spans: int = 0
    ignored: int = 0
    rejected_spans: set[int] = field(default_factory=set)
    reasons: list[str] = field(default_factory=list)

    @property
    def error_message(self) -> str:
        return "; ".join(self.reasons[:_MAX_REASONS])

    def reject(self, positions: set[int], reason: str) -> None:
        self.rejected_spans |= positions
        self.reasons.append(reason)


def mapping_config() -> MappingConfig:
    return MappingConfig(
        semantic_error_types=frozenset(settings.OTLP_SEMANTIC_ERROR_TYPES),
        semantic_http_statuses=frozenset(settings.OTLP_SEMANTIC_HTTP_STATUSES),
        mcp_tool_spans=settings.OTLP_MCP_TOOL_SPANS,
        result_checks=(
            span_result_checks(healthy_empty=settings.OTLP_HEALTHY_EMPTY_TOOLS)
            if settings.OTLP_RESULT_CHECKS
            else None
        ),
    )


def ingest_otlp_export(
    *, export: DecodedExport, config: MappingConfig, token: AgentToken | None
) -> OtlpResult:
    """Apply every mappable span once; report the spans that could not be applied.

    A span is rejected alone, with its reason, when it cannot be read, when what it says about
    its run or worker cannot be stored, or when its event fails the events API's checks; the
    spans of the export are then mapped again without it, so that it leaves no trace (not even
    as the start of its run). Each worker's events and its runs' corrections are one
    ``ingest_batch``: one durable transaction, the fleet updated after its commit."""
    result = OtlpResult(spans=len(export.spans) + len(export.invalid))
    for position, reason in export.invalid:
        result.reject({position}, f"span {position}: {reason}")
    mapped = _map(export, config=config)
    result.ignored = mapped.ignored
    for index, reason in mapped.rejected.items():
        position = export.positions[index]
        result.reject({position}, f"span {position}: {reason}")
    for worker_id, events in mapped.batches.items():
        _ingest_worker(export, mapped, worker_id, events, token=token, result=result)
    return result


def _map(export: DecodedExport, *, config: MappingConfig) -> MappedExport:
    mapped = map_spans(export.spans, config=config)
    refused = dict(mapped.rejected)
    for events in mapped.batches.values():
        for rejection in validate_events(events)[1]:
            index = mapped.span_of_event.get(rejection.event_id or "", -1)
            if index >= 0:  # -1: a run.started, made from spans that passed the mapping
                refused[index] = f"{_what(events[rejection.index])}: {rejection.reason}"
    if len(refused) == len(mapped.rejected):
        return mapped
    return map_spans(export.spans, config=config, refused=refused)


def _ingest_worker(
    export: DecodedExport,
    mapped: MappedExport,
    worker_id: str,
    events: list[dict[str, Any]],
    *,
    token: AgentToken | None,
    result: OtlpResult,
) -> None:
    runs = [facts for facts in mapped.runs.values() if facts.worker_id == worker_id]
    spans = {
        export.positions[index]
        for event in events
        if (index := mapped.span_of_event[event["id"]]) >= 0
    }
    try:
        reply = ingest_batch(
            token=token, worker_id=worker_id, events=events,
            before_commit=partial(_apply_run_facts, runs, worker_id=worker_id, token=token),
        )  # fmt: skip
    except TokenMismatch as exc:  # a token bound to another worker: these spans only
        result.reject(spans, exc.detail)
        return
    except DataError:
        # The checks above should leave nothing PostgreSQL refuses; if one slips through, the
        # worker's transaction is rolled back whole and the rest of the export still lands.
        logger.exception("OTLP spans of worker %r refused by the database", worker_id)
        result.reject(spans, "the database refused these spans (a value it cannot store)")
        return
    for rejection in reply.rejected:
        index = mapped.span_of_event.get(rejection.event_id or "", -1)
        if index < 0:
            # A synthesized run.started: the run's own spans are rejected (and counted)
            # with the reason that matters, e.g. the run belongs to another worker.
            continue
        position = export.positions[index]
        result.reject({position}, f"span {position}: {_what(events[rejection.index])}: "
                      f"{rejection.reason}")  # fmt: skip


def _what(event: dict[str, object]) -> str:
    return f"{event.get('type')} {event.get('id')}"


_CORRECTED = (
    ("source", "varchar"), ("started_at", "timestamptz"), ("cost_estimated", "boolean"),
    ("conversation_id", "varchar"), ("agent", "varchar"), ("finished_at", "timestamptz"),
    ("status", "varchar"), ("duration_ms", "bigint"),
)  # fmt: skip


def _apply_run_facts(
    all_facts: list[RunFacts], *, worker_id: str, token: AgentToken | None
) -> None:
    """Lock the batch's runs, correct them in memory and write the changed ones back: on
    PostgreSQL in one ``UPDATE ... FROM (VALUES ...)`` (Django's bulk_update builds a CASE per
    field and run, which cost more than the ingest itself), elsewhere one UPDATE per run."""
    locked = (
        Run.objects.select_for_update(of=("self",))
        .filter(
            worker__token_key=token.pk if token is not None else 0,
            worker__worker_id=worker_id,
            run_id__in=[f.run_id for f in all_facts],
        )
        .order_by("pk")
    )  # one lock order for concurrent exports of the same runs
    runs = {run.run_id: run for run in locked}
    changed = [
        run
        for facts in all_facts
        if (run := runs.get(facts.run_id)) is not None  # None: its run.started was rejected
        and _correct(run, facts)
    ]
    if not changed:
        return
    if connection.vendor != "postgresql":
        for run in changed:
            Run.objects.filter(pk=run.pk).update(**{n: getattr(run, n) for n, _ in _CORRECTED})
        return
    row = "(%s::bigint, " + ", ".join(f"%s::{sql_type}" for _, sql_type in _CORRECTED) + ")"
    names = ", ".join(name for name, _ in _CORRECTED)
    sets = ", ".join(f"{name} = v.{name}" for name, _ in _CORRECTED)
    params = [value for run in changed for value in _row(run)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Run._meta.db_table} AS r SET {sets} FROM (VALUES "
            + ", ".join([row] * len(changed))
            + f") AS v(id, {names}) WHERE r.id = v.id",
            params,
        )


def _row(run: Run) -> list[Any]:
    return [run.pk, *(getattr(run, name) for name, _ in _CORRECTED)]


def _correct(run: Run, facts: RunFacts) -> set[str]:
    """Order-independent corrections: the earliest start wins, the earliest-starting agent span
    names the run and decides its end, an estimated cost stays marked."""
    changed = {"source"} if run.source != RunSource.OTLP else set()
    run.source = RunSource.OTLP
    first = _datetime(facts.first_start_ns)
    if first < run.started_at:
        run.started_at = first
        changed.add("started_at")
    if facts.cost_estimated and not run.cost_estimated:
        run.cost_estimated = True
        changed.add("cost_estimated")
    if facts.conversation_id and not run.conversation_id:
        run.conversation_id = facts.conversation_id
        changed.add("conversation_id")
    agent = facts.agent
    if agent is not None and _datetime(agent.start_ns) <= run.started_at:
        status = RunStatus.FAILED if agent.failed else RunStatus.COMPLETED
        changed |= _set(run, agent=agent.name, finished_at=_datetime(agent.end_ns), status=status)
    if run.finished_at is not None:
        duration = max(0, int((run.finished_at - run.started_at).total_seconds() * 1000))
        changed |= _set(run, duration_ms=duration)
    return changed


def _set(run: Run, **values: object) -> set[str]:
    changed = {name for name, value in values.items() if getattr(run, name) != value}
    for name in changed:
        setattr(run, name, values[name])
    return changed


def _datetime(unix_ns: int) -> datetime:
    seconds, nanos = divmod(unix_ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=nanos // 1000)
