"""`PlaneConfig`: every setting of a ControlPlane in one frozen value (defaults: docs/api.md).

plane = ControlPlane(url, token=token, worker_id="w1", config=PlaneConfig(cooldown=60))
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from breaker_panel.classify import Classifier
from breaker_panel.core import ToolBreaker
from breaker_panel.result_checks import ResultChecker
from breaker_panel.vocabulary import SCOPES
from breaker_panel.ways import parse_way
from breaker_panel.worker import DEFAULT_COOLDOWN, DEFAULT_MAX_COOLDOWN

__all__ = ["PlaneConfig"]


@dataclass(frozen=True, slots=True)
class PlaneConfig:
    """How a ControlPlane's breakers trip, and how it sends events and syncs the fleet state.

    Change one setting with `dataclasses.replace(config, fleet_wait=0)`.
    """

    # -- the worker-scope breakers, and which scopes may remove a tool from a run -----------
    threshold: int = ToolBreaker.THRESHOLD
    cooldown: float = DEFAULT_COOLDOWN
    max_cooldown: float = DEFAULT_MAX_COOLDOWN
    # Every scope is on by default; turning one off is for comparisons (the outage replay)
    # and staged roll-outs.
    scopes: Collection[str] = SCOPES
    classify: Classifier | None = None  # None: `breaker_panel.classify.classify`
    # What `Run.record_result()` checks; None: every built-in check on every tool. One checker
    # per plane, so the stale check sees the same answer across this worker's runs.
    result_checks: ResultChecker | None = None
    # How `Run.toolset()` takes a lost tool away when neither the call nor the run names a way:
    # "remove", "restrict", "refuse", or None for the default of the array's provider shape
    # (`breaker_panel.ways.DEFAULT_WAYS`). `available()` always removes.
    way: str | None = None
    # -- sending events ------------------------------------------------------------------
    batch_size: int = 100
    # A batch takes every waiting event up to this (half the server's INGEST_MAX_EVENTS, 1000):
    # under load a backlog drains in a few large requests instead of many of batch_size.
    max_batch_size: int = 500
    flush_interval: float = 1.0
    max_buffer: int = 10_000
    timeout: float = 5.0  # seconds per HTTP request, on the background threads
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    server_error_tries: int = 3
    # -- the fleet state ------------------------------------------------------------------
    fleet_poll_interval: float = 1.0
    fleet_wait: float = 20.0  # the long-poll's wait; 0 polls only
    trial_retry_interval: float = 5.0

    def __post_init__(self) -> None:
        if isinstance(self.scopes, str):
            raise ValueError(f"scopes must be a collection of scope names, got {self.scopes!r}")
        chosen = set(self.scopes)
        unknown = chosen - set(SCOPES)
        if unknown:
            raise ValueError(f"scopes must be among {list(SCOPES)}, got {sorted(unknown)}")
        object.__setattr__(self, "way", parse_way(self.way))
        # A tuple in a fixed order, so configs compare equal whatever collection was passed.
        object.__setattr__(self, "scopes", tuple(s for s in SCOPES if s in chosen))
