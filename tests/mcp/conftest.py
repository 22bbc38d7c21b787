"""Fixtures for the MCP tests (helpers in scripts/testing/mcp_servers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.testing.mcp_servers import Flaky, Process


@pytest.fixture
def flaky(tmp_path: Path) -> Flaky:
    return Flaky(tmp_path / "flaky.json")


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.stop()
