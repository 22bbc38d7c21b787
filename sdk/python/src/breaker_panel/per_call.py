"""Per-call breakers: worker scope on its own, or one worker of the fleet (ControlPlane).

Used by the MCP gateway and by `guard_session` (given the worker breakers or a plane); it sits
below both so that neither imports the other.

Each client session is one run (docs/adr/0182-one-run-per-mcp-client-session.md); each call of it
is decided by a fresh view of the worker and fleet scopes, so a tool that comes back during a
days-long session is seen again. The offered set is read through a view that reports nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from breaker_panel.classify import ToolFailure
from breaker_panel.client import ControlPlane, Run
from breaker_panel.core import ToolBreaker
from breaker_panel.notice import Removal, render_notice
from breaker_panel.vocabulary import Scope, State
from breaker_panel.worker import RunBreakers, WorkerBreakers

__all__ = ["CallRecord", "FleetBreakers", "LocalBreakers", "PerCallBreakers", "refusal"]

# A run breaker that never trips: one call cannot make five failures, and the run scope is
# not what a gateway is for.
_NEVER = 2**62


class CallRecord:
    """One `tools/call` as its run sees it: refused with a notice, or allowed and then finished."""

    def __init__(
        self,
        name: str,
        breakers: RunBreakers,
        run: Run | None = None,
        *,
        session: bool = False,
        others: Iterable[str] = (),
    ) -> None:
        self.name = name
        self._breakers = breakers
        self._run = run
        self._session = session  # the run outlives the call: report into it, never finish it
        self._started = time.perf_counter()
        # is_open() first: asking about a tool offers it, and a run hears of other scopes'
        # removals only for tools it offers.
        removal = breakers.removals().get(name) if breakers.is_open(name) else None
        self.notice = None if removal is None else refusal(removal, others)
        if self.notice is not None:
            if run is not None:
                run.record_blocked(name, breakers=breakers if session else None)
            self._close()

    @property
    def refused(self) -> bool:
        return self.notice is not None

    def finish(self, failure: ToolFailure | None) -> None:
        """Record the upstream's answer (None: success) and end the run."""
        run, name = self._run, self.name
        if run is not None:
            duration_ms = int((time.perf_counter() - self._started) * 1000)
            view = self._breakers if self._session else None
            if failure is None:
                run.record_success(name, duration_ms=duration_ms, breakers=view)
            else:
                run.record_failure(name, failure, duration_ms=duration_ms, breakers=view)
        elif failure is None:
            self._breakers.record_success(name)
        else:
            self._breakers.record_failure(name, failure)
        self._close(failed=failure is not None and failure.retryable)

    def abandon(self) -> None:
        """The call was cancelled before the upstream answered: end the run, record nothing."""
        self._close()

    def _close(self, *, failed: bool = False) -> None:
        if self._run is not None and not self._session:
            self._run.finish(status="failed" if failed else "completed")
        else:
            self._breakers.close()  # hand back the trial leases this call did not use


def refusal(removal: Removal, others: Iterable[str] = ()) -> str:
    """What a refused call answers. For a client that never re-lists (most coding agents), this
    text is the whole mechanism: it says the tool is out for this task, what to do instead, and
    that calling it again will not work (docs/adr/0183-refusals-work-without-list-changed.md)."""
    tool = removal.tool
    why = render_notice([removal], []) or f"{tool} is unavailable right now."
    alternatives = sorted(set(others) - {tool})
    instead = (
        f"Use another tool instead ({', '.join(alternatives[:8])}), or"
        if alternatives
        else "Carry on without it, or"
    )
    return (
        f"{tool} is OUT for the rest of this task: the call was refused and did not run.\n"
        f"{why}\n"
        f"Calling {tool} again will not work: every call is refused the same way. "
        f"{instead} tell the user that {tool} is unavailable."
    )


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

    def begin(self, name: str, *, session: str = "", others: Iterable[str] = ()) -> CallRecord:
        """One call of `name` for the client session `session`; `others`: the tools the client
        may use instead (named in a refusal)."""
        raise NotImplementedError

    def end_session(self, session: str) -> None:
        """The client session is over: finish its run."""

    def end_idle(self, idle: float) -> int:
        """Finish the runs of sessions without a call for `idle` seconds; how many."""
        return 0

    def retry_in(self, names: Iterable[str]) -> float | None:
        """Seconds until the first of the open `names` is due its trial, when the offered set
        may change by itself (None: none of them is open at worker scope)."""
        due = [self.worker.retry_in(n) for n in names if self.worker.is_open(n)]
        return min(due) if due else None

    def needs_trial(self, name: str) -> bool:
        """Is `name` not closed, at worker scope or a wider one, so that its next allowed call
        is a half-open trial (the gateway's probe looks at tools it offers, for which this
        means: the trial is due and this worker may make it)?"""
        if self.worker.state(name) is not State.CLOSED:
            return True
        for source in self._sources():
            status = source.snapshot().get(name)
            if status is None or status.state not in (State.OPEN, State.HALF_OPEN):
                continue
            # A lease-trial scope: only while this worker holds a lease it has not used (a
            # trial made is decided by the control plane, not made again).
            trials = getattr(source, "trials", None)
            if trials is None or name in trials():
                return True
        return False

    def close(self) -> None:
        """Flush what is buffered (a ControlPlane) and stop."""

    def _sources(self) -> tuple[Any, ...]:
        return ()


class LocalBreakers(PerCallBreakers):
    """Worker scope only: this process is the worker."""

    def __init__(self, worker: WorkerBreakers) -> None:
        self.worker = worker

    def begin(self, name: str, *, session: str = "", others: Iterable[str] = ()) -> CallRecord:
        return CallRecord(name, self.worker.start_run(_NEVER), others=others)


@dataclass
class _Session:
    run: Run
    last_call: float


class FleetBreakers(PerCallBreakers):
    """Worker and fleet scope through a ControlPlane: each client session is reported as one
    run, its calls in order; the run finishes when the session ends or goes idle."""

    def __init__(self, plane: ControlPlane, *, agent: str, run_per_call: bool = False) -> None:
        self.plane = plane
        self.worker = plane.worker
        self.agent = agent
        # guard_session: no hook tells it when the caller's session ends, so each call is a run.
        self.run_per_call = run_per_call
        self.sessions: dict[str, _Session] = {}

    def begin(self, name: str, *, session: str = "", others: Iterable[str] = ()) -> CallRecord:
        if self.run_per_call:
            run = self.plane.start_run(agent=self.agent, step_budget=None)
            return CallRecord(name, run.breakers, run, others=others)
        entry = self.sessions.get(session)
        now = time.monotonic()
        if entry is None or entry.run.finished:
            entry = _Session(self.plane.start_run(agent=self.agent, step_budget=None), now)
            self.sessions[session] = entry
        entry.last_call = now
        entry.run.step += 1  # each call its own step: the run page lists them in order
        run = entry.run
        return CallRecord(name, run.view(), run, session=True, others=others)

    def end_session(self, session: str) -> None:
        entry = self.sessions.pop(session, None)
        if entry is not None:
            entry.run.finish(status="completed")

    def end_idle(self, idle: float) -> int:
        cutoff = time.monotonic() - idle
        stale = [key for key, entry in self.sessions.items() if entry.last_call <= cutoff]
        for key in stale:
            self.end_session(key)
        return len(stale)

    def close(self) -> None:
        for key in list(self.sessions):
            self.end_session(key)
        self.plane.close()  # safe to call twice

    def _sources(self) -> tuple[Any, ...]:
        return (self.plane.fleet,) if Scope.FLEET in self.plane.scopes else ()
