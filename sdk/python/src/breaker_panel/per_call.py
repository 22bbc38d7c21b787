"""Per-call breakers: worker scope on its own, or one worker of the fleet (ControlPlane).

Used by the MCP gateway and by `guard_session` (given the worker breakers or a plane); it sits
below both so that neither imports the other.

Each `tools/call` is one run (see docs/adr/0086-the-mcp-gateway-makes-each-tools.md): a run keeps a
removed tool for the rest of the run, and a desktop client's session can last for days, so a
session-long run would never see a tool come back. The offered set is read through a run view that
reports nothing, so listing tools never adds events.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from breaker_panel.classify import ToolFailure
from breaker_panel.client import ControlPlane, Run
from breaker_panel.core import ToolBreaker
from breaker_panel.notice import Removal, render_notice
from breaker_panel.vocabulary import Scope
from breaker_panel.worker import RunBreakers, WorkerBreakers

__all__ = ["CallRecord", "FleetBreakers", "LocalBreakers", "PerCallBreakers"]

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


class PerCallBreakers:
    """What the gateway and `guard_session` ask: which tools to offer now, and may this call
    go upstream."""

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


class LocalBreakers(PerCallBreakers):
    """Worker scope only: this process is the worker."""

    def __init__(self, worker: WorkerBreakers) -> None:
        self.worker = worker

    def begin(self, name: str) -> CallRecord:
        return CallRecord(name, self.worker.start_run(_NEVER))


class FleetBreakers(PerCallBreakers):
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
