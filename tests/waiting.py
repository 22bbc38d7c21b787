"""The one wait-and-poll helper: for what another process or thread does (a Celery worker, an SDK
sender thread, a live server). Polls; the generous deadline only matters when a test fails."""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_TIMEOUT_S = 30.0


def wait_for(
    condition: Callable[[], object],
    what: str = "the condition",
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = 0.01,
) -> None:
    """Return as soon as ``condition()`` is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
