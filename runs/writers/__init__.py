"""The database side of ingest, in two steps per batch: ``claim`` (what is new, which runs exist)
and ``write`` (everything the new events change), both inside the caller's ``transaction.atomic()``
on Django's own connection. One writer per kind of database: ``postgres``, and ``orm`` for others.
"""

from __future__ import annotations

from django.db import connection

from runs.writers.orm import OrmWriter
from runs.writers.postgres import PostgresWriter
from runs.writers.writes import (
    BatchWriter,
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

__all__ = (
    "BatchWriter",
    "Claim",
    "Finish",
    "KnownRun",
    "NewRun",
    "OrmWriter",
    "PostgresWriter",
    "RunUpdate",
    "Totals",
    "WriteConflict",
    "Writes",
    "batch_writer",
    "ledger_key",
)


def batch_writer() -> BatchWriter:
    return PostgresWriter() if connection.vendor == "postgresql" else OrmWriter()
