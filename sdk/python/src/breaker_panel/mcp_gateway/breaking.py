"""Per-call breakers: worker scope on its own, or one worker of the fleet (ControlPlane).

Used by the gateway, and by `guard_session` when it is given the worker breakers or a plane.

Each `tools/call` is one run (see docs/adr/0086-the-mcp-gateway-makes-each-tools.md): a run keeps a
removed tool for the rest of the run, and a desktop client's session can last for days, so a
session-long run would never see a tool come back. The offered set is read through a run view that
reports nothing, so listing tools never adds events.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from breaker_panel import (
    ControlPlane,
    Removal,
    Run,
    RunBreakers,
    Scope,
    ToolBreaker,
    ToolFailure,
    WorkerBreakers,
)
from breaker_panel.notice import render_notice

__all__ = ["CallRecord", "FleetBreakers", "GatewayBreakers", "GatewayPlane", "LocalBreakers"]

# A run breaker that never trips: one call cannot make five failures, and the run scope is
# not what a gateway is for.
_NEVER = 2**62


class CallRecord:
    """One `tools/call` as its run sees it: refused with a notice, or allowed and then finished."""

    def __init__(self, name: str, breakers: RunBreakers, run: Run | None = None) -> None:
        self.name = name
        self._breakers = breakers
        self._run = run
        self._started = time.perf_counter()
        # is_open() first: asking about a tool offers it, and a run hears of other scopes'
        # removals only for tools it offers.
        removal = breakers.removals().get(name) if breakers.is_open(name) else None
        self.notice = None if removal is None else _notice(removal)
        if self.notice is not None:
            if run is not None:
                run.record_blocked(name)
            self._close()

    @property
    def refused(self) -> bool:
        return self.notice is not None

    def finish(self, failure: ToolFailure | None) -> None:
        """Record the upstream's answer (None: success) and end the run."""
        run, name = self._run, self.name
        if run is not None:
            duration_ms = int((time.perf_counter() - self._started) * 1000)
            if failure is None:
                run.record_success(name, duration_ms=duration_ms)
            else:
                run.record_failure(name, failure, duration_ms=duration_ms)
        elif failure is None:
            self._breakers.record_success(name)
        else:
            self._breakers.record_failure(name, failure)
        self._close(failed=failure is not None and failure.retryable)

    def abandon(self) -> None:
        """The call was cancelled before the upstream answered: end the run, record nothing."""
        self._close()

    def _close(self, *, failed: bool = False) -> None:
        if self._run is not None:
            self._run.finish(status="failed" if failed else "completed")
        else:
            self._breakers.close()


def _notice(removal: Removal) -> str:
    # Only the called tool: the run has folded in every removal, the model asked about one.
    return render_notice([removal], []) or f"{removal.tool} is unavailable right now."


class GatewayBreakers:
    """What the gateway asks: which tools to offer now, and may this call go upstream."""

    worker: WorkerBreakers

    def offered(self, names: Iterable[str]) -> frozenset[str]:
        """The names among `names` a client may call now (a tool due its half-open trial is
        offered: its next call is the trial)."""
        view = RunBreakers(ToolBreaker(_NEVER), worker=self.worker, sources=self._sources())
        try:
            return frozenset(tool["name"] for tool in view.available({"name": n} for n in names))
        finally:
            view.close()  # hand back the trial leases the view claimed

    def begin(self, name: str) -> CallRecord:
        raise NotImplementedError

    def close(self) -> None:
        """Flush what is buffered (a ControlPlane) and stop."""

    def _sources(self) -> tuple[Any, ...]:
        return ()


class LocalBreakers(GatewayBreakers):
    """Worker scope only: this process is the worker."""

    def __init__(self, worker: WorkerBreakers) -> None:
        self.worker = worker

    def begin(self, name: str) -> CallRecord:
        return CallRecord(name, self.worker.start_run(_NEVER))


class GatewayPlane(ControlPlane):
    """A ControlPlane that tells the gateway when the fleet state changed, and that asks for
    fleet trial leases whether or not a call is in flight: a gateway is always serving, and a
    tool it offers for its trial is called by whichever client comes next.

    The fleet state arrives by the SDK's long-poll (`fleet_wait`): the control plane answers
    the held request as soon as an operator or a breaker changes it, and `update_fleet` wakes
    the gateway, which re-checks its offered set and tells its clients at once.
    """

    def _may_ask_for_trials(self) -> bool:
        # A gateway is always serving: it asks for a half-open tool's trial (and polls at the
        # polling cadence while one is half-open) with or without a call in flight.
        return Scope.FLEET in self.scopes

    on_fleet_change: Callable[[], None] | None = None

    def update_fleet(self, snapshot: Mapping[str, Any], *, authoritative: bool = False) -> None:
        before = self.fleet.version
        super().update_fleet(snapshot, authoritative=authoritative)
        if self.fleet.version != before and self.on_fleet_change is not None:
            self.on_fleet_change()

    def _ask_for_trials(self) -> None:
        before = self.fleet.version
        super()._ask_for_trials()
        if self.fleet.version != before and self.on_fleet_change is not None:
            self.on_fleet_change()


class FleetBreakers(GatewayBreakers):
    """Worker and fleet scope through a ControlPlane: each call is reported as a run."""

    def __init__(self, plane: ControlPlane, *, agent: str) -> None:
        self.plane = plane
        self.worker = plane.worker
        self.agent = agent

    def begin(self, name: str) -> CallRecord:
        run = self.plane.start_run(agent=self.agent, step_budget=None)
        return CallRecord(name, run.breakers, run)

    def close(self) -> None:
        self.plane.close()  # safe to call twice

    def _sources(self) -> tuple[Any, ...]:
        return (self.plane.fleet,) if Scope.FLEET in self.plane.scopes else ()
