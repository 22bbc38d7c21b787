"""guard_session on the mcp 1.x package, in an interpreter that has it.

The project's venv has mcp 2.x, so this runs only when `MCP1_PYTHON` names a Python with
`mcp>=1,<2` installed (for example `python3.12 -m venv /tmp/mcp1 && /tmp/mcp1/bin/pip install
'mcp==1.30.0'`, then `MCP1_PYTHON=/tmp/mcp1/bin/python`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MCP1_PYTHON = os.environ.get("MCP1_PYTHON", "")


@pytest.mark.skipif(not MCP1_PYTHON, reason="set MCP1_PYTHON to a Python with mcp 1.x")
def test_guard_session_works_with_mcp_1x_and_the_gateway_refuses_it() -> None:
    done = subprocess.run(
        [MCP1_PYTHON, str(ROOT / "tests/mcp/check_mcp1.py")],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ok: 5 failures hid the tool" in done.stdout
    assert "semantic isError does not open it" in done.stdout
    assert "gateway refused: breaker-panel-mcp needs mcp>=2.0" in done.stdout
