"""Fixtures for the agent-side SDK tests.

These tests import no Django; they run with `-p no:django` as well as under pytest-django.
"""

from __future__ import annotations

import pytest

from tests.sdk.support import FakeClock, TransitionLog


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def transitions() -> TransitionLog:
    return TransitionLog()
