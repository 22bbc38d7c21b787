"""Run a script in a process of its own on a fresh SQLite database, the demo's default (the test
session runs on PostgreSQL), and read the JSON it prints last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]


def run_on_sqlite(script: str, tmp_path: Path, *, timeout: float) -> Any:
    env = {key: value for key, value in os.environ.items() if key != "TEST_DATABASE_NAME"}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        REDIS_URL=settings.REDIS_URL,
        DJANGO_SETTINGS_MODULE="controlplane.settings",
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
