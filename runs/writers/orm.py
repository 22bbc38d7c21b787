"""The portable writer (SQLite for the demo): the steps of ``BatchWriter`` one statement at a
time through the ORM, with ``INSERT ... ON CONFLICT ... RETURNING`` (SQLite 3.35+) for the ledger
and the worker row."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, connection, models
from django.db.models import F

from runs.models import IngestedEvent, ModelCall, ReportedTransition, Run, ToolCall, Worker
from runs.writers.writes import (
    EVENT_ID_OF,
    MODEL_CALL_FIELDS,
    TOOL_CALL_FIELDS,
    TOTAL_FIELDS,
    TRANSITION_FIELDS,
    Claim,
    Finish,
    KnownRun,
    NewRun,
    RunUpdate,
    Totals,
    WriteConflict,
    Writes,
    ledger_key,
)

__all__ = ("OrmWriter",)

# Keeps the portable path within SQLite's bound-parameter limit whatever INGEST_MAX_EVENTS says.
_LEDGER_CHUNK = 1000


def _table(model: type[models.Model]) -> str:
    return str(connection.ops.quote_name(model._meta.db_table))


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class OrmWriter:
    """One statement at a time; plain SQL for the two upserts, the ORM for the rest."""

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
    ) -> Claim:
        stamp = connection.ops.adapt_datetimefield_value(now)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {_table(Worker)} (token_key, worker_id, first_seen_at, last_seen_at)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (token_key, worker_id)"
                " DO UPDATE SET last_seen_at = excluded.last_seen_at RETURNING id",
                [token_key, worker_id, stamp, stamp],
            )
            worker_pk = int(cursor.fetchone()[0])
            new_ids: set[str] = set()
            prefix = ledger_key(worker_pk, "")
            for chunk in _chunks(event_ids, _LEDGER_CHUNK):
                values = ", ".join(["(%s, %s, %s)"] * len(chunk))
                params: list[Any] = []
                for event_id in chunk:
                    params += (prefix + event_id, worker_pk, stamp)
                cursor.execute(
                    f"INSERT INTO {_table(IngestedEvent)} (event_id, worker_id, received_at)"
                    f" VALUES {values} ON CONFLICT (event_id) DO NOTHING RETURNING {EVENT_ID_OF}",
                    params,
                )
                new_ids.update(row[0] for row in cursor.fetchall())
        rows = Run.objects.filter(worker_id=worker_pk, run_id__in=run_ids).values_list(
            "pk", "run_id", "started_at", "finished_at", *TOTAL_FIELDS
        )
        runs = {
            run_id: KnownRun(pk, run_id, started, finished is not None, Totals(*totals))
            for pk, run_id, started, finished, *totals in rows
        }
        return Claim(worker_pk=worker_pk, new_event_ids=new_ids, runs=runs)

    def write(self, writes: Writes, *, worker_pk: int) -> None:
        if writes.release_event_ids:
            keys = [ledger_key(worker_pk, event_id) for event_id in writes.release_event_ids]
            IngestedEvent.objects.filter(event_id__in=keys).delete()
        if writes.dropped_events:
            Worker.objects.filter(pk=worker_pk).update(
                dropped_events=F("dropped_events") + writes.dropped_events
            )
        # Every run a row may name: the known runs (also those whose totals did not change, as
        # for a batch holding only a removal) and the ones this batch starts.
        # Agents' times come with any offset pydantic parses (runs.schemas.Timestamp). Django
        # sends them to PostgreSQL with the offset as is, and offsets beyond 15:59 are refused,
        # so they go as UTC; SQLite's backend makes every aware time UTC itself.
        utc = connection.vendor != "sqlite"
        pks = dict(writes.known_run_pks)
        pks.update(self._create_runs(writes.new_runs, worker_pk=worker_pk, utc=utc))
        for update in sorted(writes.run_updates, key=lambda u: u.pk):
            self._update_run(update, utc=utc)
        _bulk_create(
            ToolCall, TOOL_CALL_FIELDS, writes.tool_calls, pks, utc=utc, worker_id=worker_pk
        )
        _bulk_create(ModelCall, MODEL_CALL_FIELDS, writes.model_calls, pks, utc=utc)
        _bulk_create(
            ReportedTransition,
            TRANSITION_FIELDS,
            writes.transitions,
            pks,
            utc=utc,
            worker_id=worker_pk,
        )

    def _create_runs(self, new_runs: list[NewRun], *, worker_pk: int, utc: bool) -> dict[str, int]:
        rows = [
            Run(
                run_id=run.run_id,
                agent=run.agent,
                worker_id=worker_pk,
                step_budget=run.step_budget,
                started_at=run.started_at.astimezone(UTC) if utc else run.started_at,
                **dict(zip(TOTAL_FIELDS, run.totals.as_tuple(), strict=True)),
                **_finish_fields(run.finish, utc=utc),
            )
            for run in new_runs
        ]
        try:
            created = Run.objects.bulk_create(rows)
        except IntegrityError as exc:
            raise WriteConflict("a run in this batch was started by a concurrent batch") from exc
        return {run.run_id: run.pk for run in created}

    def _update_run(self, update: RunUpdate, *, utc: bool) -> None:
        changes: dict[str, Any] = {
            name: F(name) + value
            for name, value in zip(TOTAL_FIELDS, update.totals.as_tuple(), strict=True)
            if value
        }
        finish = _finish_fields(update.finish, utc=utc)
        if not changes and not finish:
            return
        rows = Run.objects.filter(pk=update.pk)
        if finish:
            rows = rows.filter(finished_at__isnull=True)
        if rows.update(**changes, **finish) == 0 and finish:
            raise WriteConflict(f"run {update.run_id!r} was finished by a concurrent batch")


def _bulk_create(
    model: type[models.Model],
    names: tuple[str, ...],
    rows: Sequence[tuple[Any, ...]],
    pks: dict[str, int],
    *,
    utc: bool,
    **common: Any,
) -> None:
    if not rows:
        return
    objects = []
    for row in rows:
        values = dict(zip(names, row, strict=True))
        run_key = values.pop("run_key")
        if utc:
            values["ts"] = values["ts"].astimezone(UTC)  # see OrmWriter.write
        objects.append(model(**values, run_id=pks[run_key] if run_key else None, **common))
    model._default_manager.bulk_create(objects)


def _finish_fields(finish: Finish | None, *, utc: bool) -> dict[str, Any]:
    if finish is None:
        return {}
    return {
        "status": finish.status,
        "degraded": finish.degraded,
        "steps": finish.steps,
        # Agents' times come with any offset pydantic parses (runs.schemas.Timestamp); on
        # PostgreSQL Django sends the offset as is, and offsets beyond 15:59 are refused.
        "finished_at": finish.finished_at.astimezone(UTC) if utc else finish.finished_at,
        "duration_ms": finish.duration_ms,
    }
