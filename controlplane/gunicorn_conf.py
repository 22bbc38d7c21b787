"""gunicorn settings for production: ``gunicorn -c python:controlplane.gunicorn_conf``.

gevent workers: a connection waiting for a slow client's bytes is a parked greenlet, not a busy
worker, so half-sent requests cannot stall the API (docs/adr/0095-gunicorn-runs-gevent-workers.md).
psycopg and redis-py cooperate with gevent's patched sockets. Prometheus counters of every worker go
to PROMETHEUS_MULTIPROC_DIR, emptied at start and cleaned per dead worker.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# An empty value is "not set" (docker-compose passes ${NAME:-} for a setting left out of .env).
workers = int(os.environ.get("WEB_CONCURRENCY") or "3")
worker_class = "gevent"
# Concurrent connections per worker; each request in progress may hold one database connection.
worker_connections = int(os.environ.get("GUNICORN_WORKER_CONNECTIONS") or "200")
timeout = int(os.environ.get("GUNICORN_TIMEOUT") or "30")
graceful_timeout = 10
keepalive = 5
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
errorlog = "-"
# Each request runs in a fresh greenlet, so a persistent (per-greenlet) database connection
# would never be reused: connect per request (or put PgBouncer in front, docs/operations.md).
os.environ.setdefault("DB_CONN_MAX_AGE", "0")
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(Path(tempfile.gettempdir()) / "bp-prom"))


def on_starting(server: Any) -> None:
    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    shutil.rmtree(directory, ignore_errors=True)  # counters of a previous run are not ours
    directory.mkdir(parents=True, exist_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
