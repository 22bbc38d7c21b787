"""guard_session on the mcp 1.x package, in an interpreter that has it.

The project's venv has mcp 2.x; `make test` builds `.venv-mcp1` with mcp 1.30.0
(requirements-mcp1.lock) and this runs there. `MCP1_PYTHON` names another interpreter.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MCP1_PYTHON = os.environ.get("MCP1_PYTHON") or str(ROOT / ".venv-mcp1/bin/python")


@pytest.mark.skipif(
    not Path(MCP1_PYTHON).exists(), reason="no Python with mcp 1.x: `make mcp1` builds one"
)
def test_guard_session_works_with_mcp_1x_and_the_gateway_refuses_it() -> None:
    done = subprocess.run(
        [MCP1_PYTHON, str(ROOT / "tests/mcp/check_mcp1.py")],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "sdk/python/src")]),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ok: 5 failures hid the tool" in done.stdout
    assert "semantic isError does not open it" in done.stdout
    assert "gateway refused: breaker-panel-mcp needs mcp>=2.0" in done.stdout
