"""gunicorn started the production way (``controlplane.gunicorn_conf``: gevent workers,
whitenoise, multiprocess metrics) on the test database, with DEBUG off."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from scripts.testing.processes import ROOT, WebServerProcess, child_env

# Long and varied enough for the production settings; the tests sign sessions with it too.
PRODUCTION_SECRET_KEY = "test-production-secret-" + "k3Y9-q8Zr-" * 5


def production_env(**extra: str) -> dict[str, str]:
    return {
        "DEBUG": "False",
        "SECRET_KEY": PRODUCTION_SECRET_KEY,
        "TLS_PROXY": "False",  # plain HTTP on loopback, no proxy in the tests
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        **extra,
    }


def collect_static(static_root: Path) -> None:
    """``collectstatic`` with the production storage (hashed names, compressed copies)."""
    env = child_env(**production_env(STATIC_ROOT=str(static_root)))
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )


class ProductionWebServer(WebServerProcess):
    """``gunicorn -c python:controlplane.gunicorn_conf`` bound to a free loopback port."""

    label = "gunicorn-production"

    def __init__(self, *, workers: int = 3) -> None:
        super().__init__(workers=workers, threads=1)
        self.metrics_dir = Path(tempfile.mkdtemp(prefix="bp-prom-"))

    def start(
        self, *, ready_timeout: float = 60, database_url: str | None = None, **env: str
    ) -> ProductionWebServer:
        args = [
            sys.executable, "-m", "gunicorn", "-c", "python:controlplane.gunicorn_conf",
            "controlplane.wsgi:application",
        ]  # fmt: skip
        settings = production_env(
            GUNICORN_BIND=f"127.0.0.1:{self.port}",
            WEB_CONCURRENCY=str(self.workers),
            PROMETHEUS_MULTIPROC_DIR=str(self.metrics_dir),
            **env,
        )
        environment = child_env(**settings)
        if database_url is not None:  # e.g. through a proxy in front of the test database
            environment["DATABASE_URL"] = database_url
        self._spawn(args, environment)
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if not self.alive:
                self._fail("gunicorn exited during start-up")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1):
                    return self
            except urllib.error.HTTPError as exc:
                self._fail(f"/healthz answered {exc.code}")
            except OSError:
                time.sleep(0.05)
        self._fail(f"gunicorn did not answer within {ready_timeout:g} s")
        raise AssertionError("unreachable")
