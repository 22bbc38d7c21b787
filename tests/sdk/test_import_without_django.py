"""An agent process imports breaker_panel without Django or its settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import breaker_panel

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import sys
import breaker_panel, breaker_panel.example
loaded = sorted(
    m for m in sys.modules if m.split(".")[0] in {"django", "controlplane", "runs", "breakers"}
)
print(loaded)
"""


def test_importing_the_sdk_loads_no_django() -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}  # no DJANGO_SETTINGS_MODULE
    result = subprocess.run(
        [sys.executable, "-c", CHECK],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "[]"


def test_the_public_names_are_explicit_and_importable() -> None:
    for name in breaker_panel.__all__:
        assert hasattr(breaker_panel, name), name
    assert {"ToolBreaker", "ToolFailure", "WorkerBreakers", "RunBreakers", "Outcome"} <= set(
        breaker_panel.__all__
    )
