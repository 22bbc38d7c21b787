"""Fixtures for the agent-side SDK tests.

These tests import no Django; they run with `-p no:django` as well as under pytest-django.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from scripts.testing.events_server import Script, ScriptedServer
from tests.sdk.support import FakeClock, TransitionLog


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def transitions() -> TransitionLog:
    return TransitionLog()


@pytest.fixture
def serve() -> Iterator[Callable[[Script], ScriptedServer]]:
    """Start scripted events servers (scripts/testing/events_server.py); all closed at the end."""
    servers: list[ScriptedServer] = []

    def start(script: Script) -> ScriptedServer:
        servers.append(ScriptedServer(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()
