"""Pytest fixtures for the fakes. Register them with ``pytest_plugins = ["tests.fakes.fixtures"]``
in the root ``tests/conftest.py`` (or import them into a package's conftest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scripts.testing.fake_slack import FakeSlackServer


@pytest.fixture
def slack_server() -> Iterator[FakeSlackServer]:
    """A real HTTP server on 127.0.0.1 playing Slack's incoming-webhook endpoint."""
    with FakeSlackServer() as server:
        yield server
