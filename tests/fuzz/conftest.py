"""The fuzz pass shares the fleet tests' Redis fixture (fleet keys cleared before and after)."""

from __future__ import annotations

from tests.fleet.conftest import fleet_redis

__all__ = ["fleet_redis"]
