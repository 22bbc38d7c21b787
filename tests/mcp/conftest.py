"""Fixtures for the MCP tests (helpers in tests/mcp/helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.conftest import fleet_redis  # noqa: F401 - a fixture for test_gateway_fleet
from tests.mcp.helpers import Flaky, Process


@pytest.fixture
def flaky(tmp_path: Path) -> Flaky:
    return Flaky(tmp_path / "flaky.json")


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.stop()
