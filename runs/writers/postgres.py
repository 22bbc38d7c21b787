"""The PostgreSQL writer: each step of ``BatchWriter`` in one round trip (pipelined statements,
each table's rows as one JSON document). Why and how much: ``PostgresWriter``'s docstring."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any

import psycopg
from django.db import connection
from pydantic_core import TzInfo

from runs.writers.writes import (
    EVENT_ID_OF,
    TOTAL_FIELDS,
    Claim,
    KnownRun,
    NewRun,
    RunUpdate,
    Totals,
    WriteConflict,
    Writes,
    ledger_key,
)

__all__ = ("PostgresWriter",)

Columns = tuple[tuple[str, str], ...]  # (name, PostgreSQL type), in row order


def _rows_from(param: str, columns: Columns) -> str:
    """SQL that turns one JSON array of row arrays into typed rows named ``u``."""
    fields = ", ".join(
        f"(x->>{position})::{pg_type} AS {name}" for position, (name, pg_type) in enumerate(columns)
    )
    return f"(SELECT {fields} FROM jsonb_array_elements({param}::jsonb) AS x) AS u"


def _json(rows: Sequence[Sequence[Any]]) -> str:
    return json.dumps(rows, default=_json_value, ensure_ascii=False, separators=(",", ":"))


# PostgreSQL refuses a UTC offset of 16 hours or more (and fractions of a second); Python allows
# up to 24 hours.
_PG_OFFSET_LIMIT = timedelta(hours=16)
# Zones whose offset is the same for every time (what pydantic gives a parsed time).
_FIXED_OFFSET_ZONES = (TzInfo, timezone)
# The last fixed-offset zone seen within the limit: a batch's times nearly always share one
# zone object, so most times are checked by identity, not by asking the zone for its offset.
_zone_within_limit: list[tzinfo | None] = [None]


def _json_value(value: object) -> str:
    if isinstance(value, datetime):
        # An agent's offset may be beyond what PostgreSQL accepts: such a time goes as UTC. The
        # others go as they came (the same instant), without a conversion per row.
        zone = value.tzinfo
        if zone is not None and zone is _zone_within_limit[0]:
            return value.isoformat()
        offset = value.utcoffset()
        if (
            offset is not None
            and -_PG_OFFSET_LIMIT < offset < _PG_OFFSET_LIMIT
            and not offset.microseconds  # PostgreSQL takes whole seconds only
        ):
            if type(zone) in _FIXED_OFFSET_ZONES:
                _zone_within_limit[0] = zone
            return value.isoformat()
        return value.astimezone(UTC).isoformat()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"cannot send {type(value).__name__} as JSON")


_TOTAL_COLUMNS: Columns = (
    ("model_calls", "int8"), ("model_spend_usd", "numeric"), ("input_tokens", "int8"),
    ("output_tokens", "int8"), ("cache_read_tokens", "int8"), ("cache_write_tokens", "int8"),
    ("cache_input_tokens", "int8"), ("unpriced_calls", "int8"), ("tool_calls", "int8"),
    ("tool_attempts", "int8"), ("tool_failures", "int8"), ("status", "text"), ("degraded", "bool"),
    ("steps", "int8"),
    ("finished_at", "timestamptz"), ("duration_ms", "int8"),
)  # fmt: skip
_NEW_RUN_COLUMNS: Columns = (
    ("id", "int8"), ("run_id", "text"), ("agent", "text"), ("step_budget", "int8"),
    ("started_at", "timestamptz"), *_TOTAL_COLUMNS,
)  # fmt: skip
_RUN_UPDATE_COLUMNS: Columns = (("id", "int8"), *_TOTAL_COLUMNS)
_TOOL_CALL_COLUMNS: Columns = (
    ("event_id", "text"), ("run_key", "text"), ("ts", "timestamptz"), ("step", "int8"),
    ("tool", "text"), ("outcome", "text"), ("attempts", "int8"), ("duration_ms", "int8"),
    ("error", "text"),
)  # fmt: skip
_MODEL_CALL_COLUMNS: Columns = (
    ("event_id", "text"), ("run_key", "text"), ("ts", "timestamptz"), ("step", "int8"),
    ("model", "text"), ("input_tokens", "int8"), ("output_tokens", "int8"),
    ("cache_read_tokens", "int8"), ("cache_write_tokens", "int8"), ("cost_usd", "numeric"),
    ("cost_source", "text"), ("problem", "text"), ("duration_ms", "int8"),
)  # fmt: skip
_TRANSITION_COLUMNS: Columns = (
    ("event_id", "text"), ("run_key", "text"), ("ts", "timestamptz"), ("scope", "text"),
    ("tool", "text"), ("state", "text"), ("reason", "text"),
)  # fmt: skip

_PG_TOUCH_WORKER = """
INSERT INTO runs_worker (token_key, worker_id, first_seen_at, last_seen_at) VALUES (%s, %s, %s, %s)
ON CONFLICT (token_key, worker_id) DO UPDATE SET last_seen_at = excluded.last_seen_at
RETURNING id"""

_PG_WORKER_PK = "(SELECT id FROM runs_worker WHERE token_key = %s AND worker_id = %s)"

# Ledger keys are "<worker pk>:<event id>" (see ledger_key).
_PG_CLAIM = f"""
INSERT INTO runs_ingestedevent (event_id, worker_id, received_at)
SELECT w.id::text || ':' || event_id, w.id, %s
FROM jsonb_array_elements_text(%s::jsonb) AS event_id, {_PG_WORKER_PK} AS w(id)
ON CONFLICT (event_id) DO NOTHING RETURNING {EVENT_ID_OF}"""

_PG_LOAD_RUNS = f"""
SELECT id, run_id, started_at, finished_at IS NOT NULL, {", ".join(TOTAL_FIELDS)}
FROM runs_run WHERE worker_id = {_PG_WORKER_PK} AND run_id = ANY(%s::text[])"""

_PG_RELEASE = "DELETE FROM runs_ingestedevent WHERE event_id = ANY(%s::text[])"

_PG_ADD_DROPPED = "UPDATE runs_worker SET dropped_events = dropped_events + %s WHERE id = %s"

_PG_INSERT_RUNS = f"""
INSERT INTO runs_run (id, run_id, agent, worker_id, step_budget, started_at, model_calls,
    model_spend_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
    cache_input_tokens, unpriced_calls, tool_calls, tool_attempts, tool_failures,
    status, degraded, steps, finished_at, duration_ms)
SELECT u.id, u.run_id, u.agent, %s, u.step_budget, u.started_at, u.model_calls, u.model_spend_usd,
    u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens,
    u.cache_input_tokens, u.unpriced_calls, u.tool_calls, u.tool_attempts, u.tool_failures,
    coalesce(u.status, 'running'), coalesce(u.degraded, false), u.steps, u.finished_at,
    u.duration_ms
FROM {_rows_from("%s", _NEW_RUN_COLUMNS)}
ON CONFLICT (worker_id, run_id) DO NOTHING"""

# A finishing update only applies to a run that is not finished yet; the caller compares the
# row count with what it sent to see whether a concurrent batch finished the run first.
_PG_UPDATE_RUNS = f"""
UPDATE runs_run AS r SET
    model_calls = r.model_calls + u.model_calls,
    model_spend_usd = r.model_spend_usd + u.model_spend_usd,
    input_tokens = r.input_tokens + u.input_tokens,
    output_tokens = r.output_tokens + u.output_tokens,
    cache_read_tokens = r.cache_read_tokens + u.cache_read_tokens,
    cache_write_tokens = r.cache_write_tokens + u.cache_write_tokens,
    cache_input_tokens = r.cache_input_tokens + u.cache_input_tokens,
    unpriced_calls = r.unpriced_calls + u.unpriced_calls,
    tool_calls = r.tool_calls + u.tool_calls,
    tool_attempts = r.tool_attempts + u.tool_attempts,
    tool_failures = r.tool_failures + u.tool_failures,
    status = coalesce(u.status, r.status),
    degraded = coalesce(u.degraded, r.degraded),
    steps = CASE WHEN u.finished_at IS NULL THEN r.steps ELSE u.steps END,
    finished_at = coalesce(u.finished_at, r.finished_at),
    duration_ms = coalesce(u.duration_ms, r.duration_ms)
FROM {_rows_from("%s", _RUN_UPDATE_COLUMNS)}
WHERE r.id = u.id AND (u.finished_at IS NULL OR r.finished_at IS NULL)"""

# Children take their run's id from the batch's {run_id: id} (known runs from the claim, new ones
# from ids the claim reserved), not from a lookup: without statistics (a fresh database) the
# planner looked runs up through (worker, started_at) and read every run of the worker for each
# row. A run that is not there gives NULL, which the NOT NULL run column refuses: the batch is
# rolled back.
_RUN_PK = "(%(pks)s::jsonb ->> u.run_key)::int8"

# Ids for the runs a batch may start, reserved in the claim's round trip (unused ones are gaps).
_PG_RESERVE_RUN_IDS = (
    "SELECT nextval(pg_get_serial_sequence('runs_run', 'id')) FROM generate_series(1, %s)"
)

_PG_INSERT_TOOL_CALLS = f"""
INSERT INTO runs_toolcall (event_id, run_id, worker_id, ts, step, tool, outcome, attempts,
    duration_ms, error)
SELECT u.event_id, {_RUN_PK}, %(worker)s, u.ts, u.step, u.tool, u.outcome, u.attempts,
    u.duration_ms, u.error
FROM {_rows_from("%(rows)s", _TOOL_CALL_COLUMNS)}"""

_PG_INSERT_MODEL_CALLS = f"""
INSERT INTO runs_modelcall (event_id, run_id, ts, step, model, input_tokens, output_tokens,
    cache_read_tokens, cache_write_tokens, cost_usd, cost_source, problem, duration_ms)
SELECT u.event_id, {_RUN_PK}, u.ts, u.step, u.model, u.input_tokens, u.output_tokens,
    u.cache_read_tokens, u.cache_write_tokens, u.cost_usd, u.cost_source, u.problem,
    u.duration_ms
FROM {_rows_from("%(rows)s", _MODEL_CALL_COLUMNS)}"""

_PG_INSERT_TRANSITIONS = f"""
INSERT INTO runs_reportedtransition (event_id, run_id, worker_id, ts, scope, tool, state, reason)
SELECT u.event_id, {_RUN_PK}, %(worker)s, u.ts, u.scope, u.tool, u.state, u.reason
FROM {_rows_from("%(rows)s", _TRANSITION_COLUMNS)}"""


def _run_rows(runs: Sequence[NewRun | RunUpdate]) -> list[tuple[Any, ...]]:
    rows = []
    for run in runs:
        head: tuple[Any, ...] = (
            (run.run_id, run.agent, run.step_budget, run.started_at)
            if isinstance(run, NewRun)
            else (run.pk,)
        )
        finish = run.finish
        ending: tuple[Any, ...] = (
            (finish.status, finish.degraded, finish.steps, finish.finished_at, finish.duration_ms)
            if finish is not None
            else (None, None, None, None, None)
        )
        rows.append(head + run.totals.as_tuple() + ending)
    return rows


class PostgresWriter:
    """Two round trips per batch: pipelined statements, each table's rows as one JSON value.

    The statements of a step go out together in psycopg's pipeline mode, and each table gets all
    its rows in one statement, ``INSERT ... SELECT ... FROM jsonb_array_elements(%s::jsonb)``, with
    the rows as one JSON document (``json.dumps`` runs in C; psycopg's per-element array dumping
    cost 40% of the Python time when the rows went as one array per column). Compared with
    ``bulk_create`` for each table this more than halves the CPU a batch of 100 costs and cuts its
    database round trips from about a dozen to two (docs/benchmarks.md has the figures).
    """

    def __init__(self) -> None:
        self._reserved_run_pks: list[int] = []  # from the claim, for the runs the batch starts

    def _raw(self) -> psycopg.Connection[Any]:
        connection.ensure_connection()
        raw: psycopg.Connection[Any] = connection.connection
        return raw

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
        raw = self._raw()
        # Errors surface as Django's exception classes (the API maps OperationalError to 503).
        with connection.wrap_database_errors, raw.pipeline():
            # Django's cursors bind client-side; plain psycopg cursors bind server-side.
            psycopg.Cursor(raw).execute(
                "SELECT set_config('lock_timeout', %s, true),"
                " set_config('statement_timeout', %s, true)",
                [f"{lock_timeout_ms}ms", f"{statement_timeout_ms}ms"],
            )
            worker = psycopg.Cursor(raw)
            worker.execute(_PG_TOUCH_WORKER, [token_key, worker_id, now, now])
            ledger = psycopg.Cursor(raw)
            if event_ids:
                ledger.execute(_PG_CLAIM, [now, _json(event_ids), token_key, worker_id])
            runs = psycopg.Cursor(raw)
            reserve = psycopg.Cursor(raw)
            if run_ids:
                runs.execute(_PG_LOAD_RUNS, [token_key, worker_id, list(run_ids)])
                reserve.execute(_PG_RESERVE_RUN_IDS, [len(run_ids)])
        with connection.wrap_database_errors:
            worker_row = worker.fetchone()
            assert worker_row is not None
            worker_pk = int(worker_row[0])
            new_ids = {row[0] for row in ledger.fetchall()} if event_ids else set()
            known = runs.fetchall() if run_ids else []
            self._reserved_run_pks = [row[0] for row in reserve.fetchall()] if run_ids else []
        return Claim(
            worker_pk=worker_pk,
            new_event_ids=new_ids,
            runs={
                run_id: KnownRun(pk, run_id, started, finished, Totals(*totals))
                for pk, run_id, started, finished, *totals in known
            },
        )

    def write(self, writes: Writes, *, worker_pk: int) -> None:
        raw = self._raw()
        checks: list[tuple[psycopg.Cursor[Any], int, str]] = []

        def execute(
            sql: str,
            params: Sequence[Any] | dict[str, Any],
            expect: int | None = None,
            what: str = "",
        ) -> None:
            cursor = psycopg.Cursor(raw)
            cursor.execute(sql, params)
            if expect is not None:
                checks.append((cursor, expect, what))

        with connection.wrap_database_errors, raw.pipeline():
            if writes.release_event_ids:
                keys = [ledger_key(worker_pk, event_id) for event_id in writes.release_event_ids]
                execute(_PG_RELEASE, [keys])
            if writes.dropped_events:
                execute(_PG_ADD_DROPPED, [writes.dropped_events, worker_pk])
            pks = dict(writes.known_run_pks)
            new_pks = self._reserved_run_pks[: len(writes.new_runs)]
            if len(new_pks) < len(writes.new_runs):  # the claim reserves one per run named
                raise WriteConflict("fewer run ids reserved than runs started")
            pks.update(zip((run.run_id for run in writes.new_runs), new_pks, strict=True))
            pks_json = json.dumps(pks)
            if writes.new_runs:
                rows = _run_rows(writes.new_runs)
                execute(
                    _PG_INSERT_RUNS,
                    [worker_pk, _json([(pk, *row) for pk, row in zip(new_pks, rows, strict=True)])],
                    len(writes.new_runs),
                    "a run in this batch was started by a concurrent batch",
                )
            if writes.run_updates:
                updates = sorted(writes.run_updates, key=lambda u: u.pk)  # lock order
                execute(
                    _PG_UPDATE_RUNS,
                    [_json(_run_rows(updates))],
                    len(updates),
                    "a run in this batch was finished by a concurrent batch",
                )
            if writes.tool_calls:
                execute(
                    _PG_INSERT_TOOL_CALLS,
                    {"worker": worker_pk, "rows": _json(writes.tool_calls), "pks": pks_json},
                )
            if writes.model_calls:
                execute(
                    _PG_INSERT_MODEL_CALLS,
                    {"worker": worker_pk, "rows": _json(writes.model_calls), "pks": pks_json},
                )
            if writes.transitions:
                execute(
                    _PG_INSERT_TRANSITIONS,
                    {"worker": worker_pk, "rows": _json(writes.transitions), "pks": pks_json},
                )
        for cursor, expected, what in checks:
            if cursor.rowcount != expected:
                raise WriteConflict(what)
