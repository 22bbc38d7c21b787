"""An agent process imports breakers.sdk without Django or its settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import breakers.sdk

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import sys
import breakers.sdk, breakers.sdk.example
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"django", "controlplane", "runs"})
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
    for name in breakers.sdk.__all__:
        assert hasattr(breakers.sdk, name), name
    assert {"ToolBreaker", "ToolFailure", "WorkerBreakers", "RunBreakers", "Outcome"} <= set(
        breakers.sdk.__all__
    )
