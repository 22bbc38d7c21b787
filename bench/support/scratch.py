"""Scratch PostgreSQL databases, ``manage.py`` and free ports for the benchmarks: each benchmark
works in a database of its own, created from nothing and dropped at the end. Imported as
``support.scratch`` (the benchmarks run as scripts, with bench/ on the path)."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parents[2]


def add_database_arguments(
    parser: argparse.ArgumentParser, bench: str, *, redis_url: bool = True
) -> None:
    """``--database-url`` (the server to create the scratch database on), ``--bench-db`` (named
    after this run's ``TEST_DATABASE_NAME``, so concurrent runs never share one) and, unless
    ``redis_url=False``, ``--redis-url``."""
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument(
        "--bench-db", default=os.environ.get("TEST_DATABASE_NAME", "bp") + f"_bench_{bench}"
    )
    if redis_url:
        parser.add_argument(
            "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
        )


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def recreate_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def scratch_database(admin_url: str, name: str) -> Iterator[str]:
    """A new database ``name`` on the server of ``admin_url``; yields its URL, drops it after."""
    recreate_database(admin_url, name)
    try:
        yield with_database(admin_url, name)
    finally:
        drop_database(admin_url, name)


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    return done.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
