"""The fuzz pass shares the fleet tests' Redis fixture (fleet keys cleared before and after)."""

from __future__ import annotations

import pytest

from tests.fleet.conftest import fleet_redis

__all__ = ["fleet_redis"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "[POST /api/v1/events]" in item.name:
            # Issue 10 items 3-5 (timestamps out of range, UTC offsets beyond +-15:59, total
            # overflows) answer 500 in runs/writers.py; the lead is rewriting the ingest. Remove
            # this marker when it lands: the fuzz pass is then its regression test.
            item.add_marker(pytest.mark.xfail(reason="ingest 500s of issue 10", strict=False))
