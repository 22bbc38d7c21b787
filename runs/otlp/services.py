"""Apply an OTLP export: map its spans and hand each worker's events to ``ingest_batch``.

The ingest service does the checking, dedupe, exactly-once and the fleet hook, exactly as for
``POST /api/v1/events``. What events cannot say about a run (it came from OTLP, its cost was
estimated, its outermost agent span's name, start and end) is applied right after, in the same
transaction, with rules that give the same row whatever order the spans arrive in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from runs.models import AgentToken, Run, RunSource, RunStatus
from runs.otlp.decode import DecodedExport
from runs.otlp.mapping import MappingConfig, RunFacts, map_spans
from runs.otlp.pricing import price_tokens
from runs.services import TokenMismatch, ingest_batch

__all__ = ("OtlpResult", "ingest_otlp_export", "mapping_config")

_MAX_REASONS = 3


@dataclass(slots=True)
class OtlpResult:
    spans: int = 0
    ignored: int = 0
    rejected_spans: set[int] = field(default_factory=set)
    reasons: list[str] = field(default_factory=list)

    @property
    def error_message(self) -> str:
        return "; ".join(self.reasons[:_MAX_REASONS])


def mapping_config() -> MappingConfig:
    return MappingConfig(
        semantic_error_types=frozenset(settings.OTLP_SEMANTIC_ERROR_TYPES),
        semantic_http_statuses=frozenset(settings.OTLP_SEMANTIC_HTTP_STATUSES),
        mcp_tool_spans=settings.OTLP_MCP_TOOL_SPANS,
        pricer=price_tokens,
    )


def ingest_otlp_export(
    *, export: DecodedExport, config: MappingConfig, token: AgentToken | None
) -> OtlpResult:
    """Apply every mappable span once; report the spans that could not be applied.

    Each worker's events are one ``ingest_batch`` (its own durable transaction, the fleet updated
    after its commit); the run corrections follow in a second transaction. If that one fails the
    export is answered 503 and resent: the events are then duplicates and the corrections, which
    depend only on the spans, are made again."""
    result = OtlpResult(spans=len(export.spans) + len(export.invalid))
    for position, reason in export.invalid:
        result.rejected_spans.add(position)
        result.reasons.append(f"span {position}: {reason}")
    mapped = map_spans(export.spans, config=config)
    result.ignored = mapped.ignored
    for worker_id, events in mapped.batches.items():
        try:
            reply = ingest_batch(token=token, worker_id=worker_id, events=events)
        except TokenMismatch as exc:  # a token bound to another worker: these spans only
            spans = {mapped.span_of_event[e["id"]] for e in events} - {-1}
            result.rejected_spans |= spans
            result.reasons.append(exc.detail)
            continue
        runs = [facts for facts in mapped.runs.values() if facts.worker_id == worker_id]
        with transaction.atomic():
            _apply_run_facts(runs, worker_id=worker_id, token=token)
        for rejection in reply.rejected:
            span = mapped.span_of_event.get(rejection.event_id or "", -1)
            if span < 0:
                # A synthesized run.started: the run's own spans are rejected (and counted)
                # with the reason that matters, e.g. the run belongs to another worker.
                continue
            result.rejected_spans.add(span)
            result.reasons.append(f"{_what(events[rejection.index])}: {rejection.reason}")
    return result


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
