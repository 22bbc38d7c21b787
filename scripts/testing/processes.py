"""Real server processes for tests and benchmarks: Celery worker and beat, and a multi-process web
server (gunicorn).

Both run on the pytest-django test database and this session's Redis, are started on demand,
waited for with a deadline (never a fixed sleep) and always stopped. Their output goes to a log
file whose tail is put into the error when they fail to start.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def database_url_of_test_db() -> str:
    """DATABASE_URL of the test database pytest-django created (call after ``django_db_setup``).

    Raises ``LookupError`` for an in-memory SQLite test database, which no other process can see.
    """
    db = connection.settings_dict
    name = str(db["NAME"])
    if db["ENGINE"] == "django.db.backends.sqlite3":
        if name == ":memory:" or name.startswith("file:memorydb") or "mode=memory" in name:
            raise LookupError(
                "the test database is in-memory SQLite: run with DATABASE_URL=postgres://…"
            )
        return f"sqlite:///{name}"
    user = quote(str(db.get("USER") or ""), safe="")
    password = quote(str(db.get("PASSWORD") or ""), safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = db.get("HOST") or "localhost"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{host}{port}/{quote(name, safe='')}"


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a server process: this session's database and Redis."""
    env = {key: value for key, value in os.environ.items() if key != "TEST_DATABASE_NAME"}
    env.update(
        DATABASE_URL=database_url_of_test_db(),
        REDIS_URL=settings.REDIS_URL,
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        DJANGO_SETTINGS_MODULE="controlplane.settings",
        # No pooled connections: the test database is truncated between tests and dropped at
        # the end, which an idle connection held by a server process would get in the way of.
        DB_CONN_MAX_AGE="0",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        **extra,
    )
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM when the test session dies. A worker left running after its
    session was killed would go on consuming that session's Redis queue (and a server its port)
    when the next session claims the same database, failing that session's Celery tests."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


_PR_SET_PDEATHSIG = 1


class _ServerProcess:
    """A child process with a log file; ``stop()`` is safe to call more than once."""

    label = "server"

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix=f"{self.label}-", suffix=".log", delete=False
        )

    def _spawn(self, args: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        text = Path(self._log.name).read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _fail(self, message: str) -> None:
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"{message}\n--- {self.label} log ---\n{tail}")

    def stop(self, timeout: float = 20) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # warm shutdown: finish the current task
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if not self._log.closed:
            self._log.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class CeleryWorkerProcess(_ServerProcess):
    """``celery -A controlplane worker`` as a subprocess, on the test database.

    ``pool="threads"`` with a few threads runs tasks concurrently inside one process at little
    start-up cost; start two of these to have two worker processes.
    """

    label = "celery-worker"

    def __init__(
        self,
        *,
        pool: str = "threads",
        concurrency: int = 4,
        queues: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.hostname = f"test-{uuid.uuid4().hex[:8]}@localhost"
        self.pool, self.concurrency = pool, concurrency
        # Its own queues (and settings): a worker no other test's tasks reach.
        self.queues, self.extra_env = queues, dict(env or {})

    def start(self, *, ready_timeout: float = 60) -> CeleryWorkerProcess:
        args = [
            sys.executable, "-m", "celery", "-A", "controlplane", "worker",
            f"--pool={self.pool}", f"--concurrency={self.concurrency}",
            "-n", self.hostname, "--loglevel=INFO",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip
        if self.queues:
            args += ["-Q", ",".join(self.queues)]
        self._spawn(args, child_env(**self.extra_env))
        self.wait_ready(ready_timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        from controlplane.celery import app

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                self._fail("the Celery worker exited during start-up")
            if app.control.ping(destination=[self.hostname], timeout=0.5):
                return
        self._fail(f"the Celery worker did not answer a ping within {timeout:g} s")

    def wait_idle(self, timeout: float = 30) -> None:
        """Until the default queue is empty and this worker runs no task (or fail)."""
        from controlplane.celery import app

        deadline = time.monotonic() + timeout
        with app.connection_for_write() as conn:
            client = conn.default_channel.client
            while time.monotonic() < deadline:
                queued = sum(
                    client.llen(queue) for queue in (self.queues or (app.conf.task_default_queue,))
                )
                inspect = app.control.inspect([self.hostname], timeout=0.5)
                busy = [*(inspect.active() or {}).values(), *(inspect.reserved() or {}).values()]
                if not queued and not any(busy):
                    return
                time.sleep(0.05)
        raise AssertionError(f"the Celery worker was still busy after {timeout:g} s")


def declare_celery_queues() -> None:
    """(Re)declare the task queues' bindings in the broker.

    A test that flushes the Redis database (the shared ``redis_client`` fixture does) also wipes
    kombu's bindings; a producer that declared them before would then route messages nowhere.
    """
    from controlplane.celery import app

    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in app.amqp.queues.values():
            queue.bind(channel).declare()


class CeleryBeatProcess(_ServerProcess):
    """``celery -A controlplane beat`` with its schedule file in a temporary directory.

    It sends the project's real ``CELERY_BEAT_SCHEDULE``; start two for a duplicated beat.
    """

    label = "celery-beat"

    def start(self) -> CeleryBeatProcess:
        schedule = Path(tempfile.mkdtemp(prefix="beat-")) / "schedule"
        args = [
            sys.executable, "-m", "celery", "-A", "controlplane", "beat",
            "--loglevel=INFO", "-s", str(schedule),
        ]  # fmt: skip
        self._spawn(args, child_env())
        return self


class WebServerProcess(_ServerProcess):
    """gunicorn with several worker processes serving the control plane on a free port."""

    label = "gunicorn"

    def __init__(self, *, workers: int = 2, threads: int = 4) -> None:
        super().__init__()
        self.port = free_port()
        self.workers, self.threads = workers, threads

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, ready_timeout: float = 60, **env: str) -> WebServerProcess:
        args = [
            sys.executable, "-m", "gunicorn", "controlplane.wsgi:application",
            "--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers),
            "--threads", str(self.threads), "--timeout", "30", "--graceful-timeout", "5",
        ]  # fmt: skip
        self._spawn(args, child_env(**env))
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if not self.alive:
                self._fail("gunicorn exited during start-up")
            try:
                urllib.request.urlopen(self.url + "/api/v1/fleet", timeout=1)
            except urllib.error.HTTPError:
                return self  # 401 without a token: the app is up
            except OSError:
                time.sleep(0.05)
        self._fail(f"gunicorn did not answer within {ready_timeout:g} s")
        raise AssertionError("unreachable")
