"""Worker scope (`WorkerBreakers`, shared by every run of one agent process) and a run's combined
view of every scope (`RunBreakers`): a tool any scope removes stays removed for the rest of the run.
The wider scopes a run hears of are in `external_scope`.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from breaker_panel.classify import Classifier
from breaker_panel.classify import classify as default_classify
from breaker_panel.core import (
    Change,
    Circuit,
    Clock,
    FailureInfo,
    Outcome,
    Policy,
    Removal,
    Scope,
    State,
    ToolBreaker,
    TransitionCallback,
    describe_failure,
)
from breaker_panel.external_scope import (
    LEASE_TRIAL,
    REMOVING_STATES,
    ExternalScope,
    FleetLease,
    ScopeSource,
    ScopeState,
    TrialPhase,
    is_lease_trial,
)
from breaker_panel.notice import render_notice
from breaker_panel.result_checks import Verdict
from breaker_panel.toolsets import StepFilter, tool_names
from breaker_panel.vocabulary import COUNTED_OUTCOMES, Way
from breaker_panel.ways import Toolset, take_away

__all__ = [
    "DEFAULT_COOLDOWN",
    "DEFAULT_MAX_COOLDOWN",
    "DEFAULT_TRIAL_LEASE",
    "LEASE_TRIAL",
    "ExternalScope",
    "FleetLease",
    "RunBreakers",
    "ScopeSource",
    "ScopeState",
    "TrialLease",
    "TrialPhase",
    "WorkerBreakers",
]


DEFAULT_COOLDOWN = 30.0


DEFAULT_MAX_COOLDOWN = 300.0


# Longer than one exhausted call (5 attempts took 31 s in the outage we design for), so the
# holder can finish its trial; short enough that a run which never makes the call, or dies,
# does not keep the tool half-open for long before another run gets the trial.
DEFAULT_TRIAL_LEASE = 120.0


NO_REMOVALS: Mapping[str, Removal] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class TrialLease:
    """The right to make the one half-open trial call of `tool`, until `expires_at`."""

    tool: str
    token: int
    expires_at: float


class WorkerBreakers:
    """Worker scope: per-tool breakers shared by every run of this process; thread-safe.

    Only the trial lease holder's result moves a half-open breaker: other runs' late results
    (calls started before the trip) are kept as the last error but decide nothing. A semantic
    failure never touches worker state.
    """

    scope = Scope.WORKER

    def __init__(
        self,
        *,
        threshold: int = ToolBreaker.THRESHOLD,
        cooldown: float = DEFAULT_COOLDOWN,
        max_cooldown: float = DEFAULT_MAX_COOLDOWN,
        backoff: float = 2.0,
        trial_lease: float = DEFAULT_TRIAL_LEASE,
        clock: Clock = time.monotonic,
        on_transition: TransitionCallback | None = None,
        classify: Classifier | None = None,
    ) -> None:
        self.policy = Policy(threshold, cooldown, max_cooldown, backoff)
        self.classify: Classifier = default_classify if classify is None else classify
        self.trial_lease = trial_lease
        self.clock = clock
        self._on_transition = on_transition
        self._lock = threading.Lock()
        # Transitions wait here (appended under _lock, so in the order they happened) until one
        # thread at a time hands them to on_transition, outside _lock.
        self._unsent: collections.deque[tuple[str, Change]] = collections.deque()
        self._sending = threading.Lock()
        self._circuits: dict[str, Circuit] = {}
        self._trials: dict[str, TrialLease] = {}
        self._tokens = itertools.count(1)
        # Replaced, never mutated: runs read it on every step without taking the lock.
        self._removals: Mapping[str, Removal] = NO_REMOVALS
        self.version = 0  # bumped on every change to removals(), so runs can skip re-reading

    # -- recording -------------------------------------------------------------------------

    def record_success(self, name: str, *, lease: TrialLease | None = None) -> None:
        """closed: the count goes back to 0. half_open with the current lease: -> closed."""
        circuit = self._circuits.get(name)
        if lease is None and (circuit is None or circuit.consecutive == 0):
            return  # nothing to reset and no trial to decide: skip the lock (see ToolBreaker)
        with self._lock:
            circuit = self._circuits.get(name)
            if circuit is None:
                return
            if circuit.state is State.CLOSED:
                circuit.consecutive = circuit.degraded = 0
            elif self._is_current(lease):
                del self._trials[name]
                self._queue(name, circuit.record_success())
                self._unpublish(name)
        self._send()

    def record_failure(
        self,
        name: str,
        failure: BaseException | str | None = None,
        *,
        lease: TrialLease | None = None,
    ) -> FailureInfo:
        """Retryable: counts while closed; with the current lease, half_open -> open."""
        info = describe_failure(failure, self.classify)
        self.record_info(name, info, lease=lease)
        return info

    def record_info(self, name: str, info: FailureInfo, *, lease: TrialLease | None = None) -> None:
        """`record_failure()` for a failure already classified by `describe_failure()`."""
        if info.outcome not in COUNTED_OUTCOMES:
            return
        with self._lock:
            circuit = self._circuits.get(name)
            if circuit is None:
                circuit = self._circuits[name] = Circuit(self.policy)
            self._queue(name, self._count_retryable(circuit, name, info, lease))
        self._send()

    def _count_retryable(
        self, circuit: Circuit, name: str, info: FailureInfo, lease: TrialLease | None
    ) -> Change | None:
        if circuit.state is State.HALF_OPEN:
            if not self._is_current(lease):
                circuit.last_error = info.error  # a late result: only the trial decides
                return None
            del self._trials[name]
        change = circuit.record_retryable(
            info.error, info.attempts, self.clock, degraded=info.outcome is Outcome.DEGRADED
        )
        if change is not None:  # -> open: publish the latest error, the trip's or the trial's
            self._publish(Removal(name, Scope.WORKER, change.reason, info.error, circuit.opened_at))
        return change

    # -- the half-open trial ---------------------------------------------------------------

    def acquire_trial(self, name: str) -> TrialLease | None:
        """The trial lease for `name` if a trial is due and nobody holds it, else None.

        open -> half_open when the cooldown has elapsed. A lease that expired unused is handed
        to the next caller without a transition: the one trial has still not been made.
        None for a closed tool too: it needs no trial, call it freely.
        """
        with self._lock:
            circuit = self._circuits.get(name)
            if circuit is None or circuit.state is State.CLOSED:
                return None
            now = self.clock()
            if circuit.state is State.HALF_OPEN:
                current = self._trials.get(name)
                if current is not None and now < current.expires_at:
                    return None
            else:
                change = circuit.begin_trial(now)
                if change is None:
                    return None
                self._queue(name, change)
            lease = self._trials[name] = TrialLease(
                name, next(self._tokens), now + self.trial_lease
            )
        self._send()
        return lease

    def release_trial(self, lease: TrialLease) -> None:
        """Give an unused lease back, so the next caller gets the trial at once."""
        with self._lock:
            if self._is_current(lease):
                del self._trials[lease.tool]

    def holds_trial(self, lease: TrialLease) -> bool:
        """True while `lease` is the tool's current one (even past expiry, until re-granted)."""
        return self._trials.get(lease.tool) == lease

    def _is_current(self, lease: TrialLease | None) -> bool:
        return lease is not None and self._trials.get(lease.tool) == lease

    # -- reading ---------------------------------------------------------------------------

    def state(self, name: str) -> State:
        circuit = self._circuits.get(name)
        return State.CLOSED if circuit is None else circuit.state

    def is_open(self, name: str) -> bool:
        """True unless closed: without a trial lease, a run must not call it."""
        return name in self._removals

    def open_tools(self) -> tuple[str, ...]:
        return tuple(sorted(self._removals))

    def removals(self) -> Mapping[str, Removal]:
        """Every tool not closed (open or half_open), as of its last closed -> open."""
        return self._removals

    def consecutive(self, name: str) -> int:
        circuit = self._circuits.get(name)
        return 0 if circuit is None else circuit.consecutive

    def last_error(self, name: str) -> str:
        """The latest retryable error any run of this worker recorded for `name` ("" if none)."""
        circuit = self._circuits.get(name)
        return "" if circuit is None else circuit.last_error

    def cooldown(self, name: str) -> float:
        """The cooldown the tool waits, or would wait, before its next trial."""
        circuit = self._circuits.get(name)
        return self.policy.cooldown if circuit is None else circuit.cooldown

    def retry_in(self, name: str) -> float:
        """Seconds until the open tool `name` is due its trial (0: not open, or due now)."""
        with self._lock:
            circuit = self._circuits.get(name)
            if circuit is None or circuit.state is not State.OPEN:
                return 0.0
            return max(0.0, circuit.opened_at + circuit.cooldown - self.clock())

    def start_run(
        self,
        threshold: int | None = None,
        *,
        step_budget: int | None = None,
        sources: Iterable[ScopeSource] = (),
        on_transition: TransitionCallback | None = None,
        on_remove: Callable[[Removal], None] | None = None,
    ) -> RunBreakers:
        """A new run that shares this worker's breakers (and this worker's clock)."""
        run = ToolBreaker(
            threshold,
            step_budget=step_budget,
            clock=self.clock,
            on_transition=on_transition,
            classify=self.classify,
        )
        return RunBreakers(run, worker=self, sources=sources, clock=self.clock, on_remove=on_remove)

    # -- internals -------------------------------------------------------------------------

    def _publish(self, removal: Removal) -> None:
        self._removals = MappingProxyType({**self._removals, removal.tool: removal})
        self.version += 1

    def _unpublish(self, name: str) -> None:
        self._removals = MappingProxyType({k: v for k, v in self._removals.items() if k != name})
        self.version += 1

    def _queue(self, name: str, change: Change | None) -> None:
        """Called with the lock held: a transition waits for ``_send()`` in the order made."""
        if change is not None and self._on_transition is not None:
            self._unsent.append((name, change))

    def _send(self) -> None:
        """Hand the waiting transitions to ``on_transition`` in order, outside the lock, so that
        a callback may call back into the breaker. One thread at a time sends, its own and any
        that other threads queued meanwhile: a callback may run on another thread than the
        change's, never out of order (ADR 0160)."""
        while self._unsent:
            if not self._sending.acquire(blocking=False):
                return  # the holder sends ours too: it looks again after letting go
            try:
                while True:
                    with self._lock:
                        if not self._unsent:
                            break
                        tool, change = self._unsent.popleft()
                    assert self._on_transition is not None  # nothing is queued without one
                    self._on_transition(tool, Scope.WORKER, change.old, change.new, change.reason)
            finally:
                self._sending.release()


run_owners = itertools.count(1)  # tells runs apart for ExternalScope's trial holder


class RunBreakers:
    """One run's view of every scope: same calls as ToolBreaker, plus trial leases and `close()`.

    A tool joins the run's removed set the first time any scope is seen holding it open (run,
    then worker, then each source, in that order, names the scope) and never leaves it. A fleet
    `forced_closed` keeps the run and worker breakers from removing a tool not yet removed.
    When the worker's breaker is due a trial, the first run to ask gets the lease and sees the
    tool in `available()`; every other run sees it removed. The same goes for a fleet half-open
    tool without a probe while this worker holds its fleet trial lease (`ExternalScope`).
    The worker's and the wider scopes' tools count only once the run has offered a tool of that
    name (in a tools array passed to `available()`, or to `is_open()`): a run never hears of,
    reports or is degraded by a tool it does not have.
    """

    def __init__(
        self,
        run: ToolBreaker | None = None,
        *,
        worker: WorkerBreakers | None = None,
        sources: Iterable[ScopeSource] = (),
        clock: Clock = time.monotonic,
        on_remove: Callable[[Removal], None] | None = None,
    ) -> None:
        self.run = run if run is not None else ToolBreaker(clock=clock)
        self.worker = worker
        self.sources = tuple(sources)
        # An ExternalScope counts its changes, so a run need not re-read it on every step; any
        # other source is read on every step.
        self._versioned = tuple(s for s in self.sources if isinstance(s, ExternalScope))
        self._unversioned = len(self._versioned) < len(self.sources)
        self._clock = clock
        self._on_remove = on_remove
        self._owner = next(run_owners)
        self._lock = threading.Lock()
        self._removals: dict[str, Removal] = {}
        self._removed: frozenset[str] = frozenset()
        self._filter = StepFilter().filter
        self._settled: frozenset[str] | None = None  # removed at the first toolset()
        self._leases: dict[str, TrialLease] = {}
        self._fleet_trials: dict[str, ExternalScope] = {}  # half-open tools this run may call
        self._synced = -1  # the sum of every scope's version last folded in; -1: not to be trusted
        self._notice: tuple[tuple[int, int], str | None] = ((0, -1), None)
        # A tool name from the worker or a wider scope reaches this run (its notice, its
        # removals, its removal events) only if the run offered a tool of that exact name
        # itself: the fleet's names are sent by any agent and are untrusted text.
        self._offered: frozenset[str] = frozenset()
        self._unoffered: frozenset[str] = frozenset()  # wider-scope removals not offered (yet)

    # -- the three-line wiring -------------------------------------------------------------

    def available[T](self, tools: Iterable[T]) -> list[T]:
        """A new list in the caller's shape without the tools this run has lost."""
        tools = tools if isinstance(tools, list) else list(tools)
        return self._filter(tools, self._sync(tools))

    def toolset(
        self, tools: Iterable[Any], *, way: Way | str | None = None, tool_choice: Any = None
    ) -> Toolset:
        """The tools array and `tool_choice` to send, the lost tools taken away in `way`
        (`breaker_panel.ways`); offers the tools as `available()` does."""
        tools = tools if isinstance(tools, list) else list(tools)
        removed = self._sync(tools)
        if self._settled is None:
            self._settled = removed  # lost before the first call: removed by the default way
        return take_away(
            tools,
            removed,
            way=way,
            tool_choice=tool_choice,
            filter=self._filter,
            settled=self._settled,
        )

    def refusal(self, name: str) -> str | None:
        """None if the run may call `name` (see `is_open`); otherwise the text to answer its
        call with at once (the notice), without calling the tool."""
        if not self.is_open(name):
            return None
        return self.notice() or f"{name} is unavailable for the rest of this task."

    def notice(self) -> str | None:
        removed = self._sync()
        key = (len(removed), self.run.version)
        if key != self._notice[0]:
            strikes = [s for s in self.run.semantic_strikes() if s.tool not in removed]
            self._notice = (key, render_notice(self._removals.values(), strikes))
        return self._notice[1]

    def record_success(self, name: str) -> None:
        # The per-call hot path: a breaker with nothing to reset (the usual case, the same test
        # its own record_success() makes first) is not called at all.
        run, worker = self.run, self.worker
        circuit = run._circuits.get(name)
        if (circuit is not None and circuit.consecutive) or name in run._semantic:
            run.record_success(name)
        if worker is not None:
            if self._leases:
                worker.record_success(name, lease=self._leases.pop(name, None))
            else:
                circuit = worker._circuits.get(name)
                if circuit is not None and circuit.consecutive:
                    worker.record_success(name)
        if self._fleet_trials:
            self._finish_fleet_trial(name, Outcome.SUCCESS, "")

    def record_result(
        self, name: str, result: object, *, arguments: Mapping[str, object] | None = None
    ) -> Verdict:
        """`ToolBreaker.record_result()` across every scope: the run breaker's checks decide."""
        verdict = self.run.result_checks.check(name, result, arguments)
        failure = verdict.failure()
        if failure is None:
            self.record_success(name)
        else:
            self.record_failure(name, failure)
        return verdict

    def record_failure(self, name: str, failure: BaseException | str | None = None) -> FailureInfo:
        info = self.run.record_failure(name, failure)
        # A semantic answer to the trial says nothing about health: keep the lease and retry.
        if self.worker is not None and info.outcome in COUNTED_OUTCOMES:
            self.worker.record_info(name, info, lease=self._leases.pop(name, None))
        if self._fleet_trials:
            self._finish_fleet_trial(name, info.outcome, info.error)
        return info

    # -- reading ---------------------------------------------------------------------------

    def is_open(self, name: str) -> bool:
        """May this run call `name`? False means yes (claiming the worker's trial if one is due).
        Asking about a tool offers it: the name comes from the run itself."""
        return name in self._sync(name=name)

    def offered(self) -> frozenset[str]:
        """The names this run offered (in `available()` or `is_open()`) that another scope
        holds or held: the only wider-scope tools the run is told about."""
        return self._offered

    def open_tools(self) -> tuple[str, ...]:
        return tuple(sorted(self._sync()))

    def removals(self) -> Mapping[str, Removal]:
        """Every tool this run has lost, with the scope that removed it and when."""
        self._sync()
        return MappingProxyType(self._removals)

    def trials(self) -> Mapping[str, TrialLease]:
        """The worker trial leases this run holds (a call of these tools is the trial call)."""
        return MappingProxyType(self._leases)

    def holds_fleet_trial(self, name: str) -> bool:
        """Is this run's next call of `name` a wider scope's half-open trial call? Ask before
        recording the call: recording it ends the trial."""
        if not self._fleet_trials:
            return False  # the usual case: no lock, no lookup
        with self._lock:
            source = self._fleet_trials.get(name)
            return source is not None and source.holds_trial(name, self._owner)

    def fleet_trials(self) -> tuple[str, ...]:
        """Half-open tools of a wider scope this run may call (it holds, or passed, the trial)."""
        return tuple(sorted(self._fleet_trials))

    def close(self) -> None:
        """The run is over: hand back trial leases it never used."""
        if self.worker is not None:
            for lease in self._leases.values():
                self.worker.release_trial(lease)
        self._leases.clear()
        with self._lock:
            for name, source in self._fleet_trials.items():
                source.release_trial(name, self._owner)
            self._fleet_trials.clear()

    # -- internals -------------------------------------------------------------------------

    def _sync(self, tools: list[Any] | None = None, name: str | None = None) -> frozenset[str]:
        """Fold every scope's removals into the run's own set, which only ever grows.
        ``tools`` or ``name``: what the caller offers now, which other scopes may then remove."""
        # Every version only grows, so their sum moves whenever one does. Read them before
        # the snapshots: a change in between then only costs one more slow pass.
        versions = self.run.version + (0 if self.worker is None else self.worker.version)
        if self._versioned:
            for source in self._versioned:
                versions += source.version
        offering: Collection[str] | None = None
        if versions == self._synced:
            if not self._unoffered or (tools is None and name is None):
                return self._removed  # the per-step fast path: nothing new anywhere
            # Another scope holds a tool this run has not offered: does it offer it now?
            offering = (name,) if name is not None else tool_names(tools or ())
            if self._unoffered.isdisjoint(offering):
                return self._removed
        own = self.run.removals()
        worker = NO_REMOVALS if self.worker is None else self.worker.removals()
        with self._lock:
            added = self._collect(own, worker, offering, tools, name)
            self._add(added)
            # Unversioned sources and trials (which lapse with time) are looked at every step.
            # Trials are only taken here, so a run that holds none after this pass has none
            # until its next slow pass.
            held = self._unversioned or self._leases or self._fleet_trials
            self._synced = -1 if held else versions
        self._announce(added)
        return self._removed

    def _add(self, added: list[Removal]) -> None:
        if added:  # under self._lock
            self._removals.update((removal.tool, removal) for removal in added)
            self._removed = frozenset(self._removals)

    def _announce(self, added: list[Removal]) -> None:
        if self._on_remove is not None:
            for removal in added:
                self._on_remove(removal)

    def _collect(
        self,
        own: Mapping[str, Removal],
        worker: Mapping[str, Removal],
        offering: Collection[str] | None = None,
        tools: list[Any] | None = None,
        asked: str | None = None,
    ) -> list[Removal]:
        now = self._clock()
        external = [(source, source.snapshot()) for source in self.sources]
        pinned = {
            name
            for _, states in external
            for name, status in states.items()
            if status.state is State.FORCED_CLOSED
        }
        added: dict[str, Removal] = {}

        def remove(removal: Removal) -> None:
            if removal.tool not in self._removed and removal.tool not in added:
                added[removal.tool] = replace(removal, since=now)

        for removal in own.values():
            if removal.tool not in pinned:
                remove(removal)
        offered, unoffered = set(self._offered), set()
        offers = offering

        def is_offered(tool: str) -> bool:
            nonlocal offers
            if tool in offered:
                return True
            if offers is None and (tools is not None or asked is not None):
                offers = (asked,) if asked is not None else tool_names(tools or ())
            if offers is not None and tool in offers:
                offered.add(tool)
                return True
            unoffered.add(tool)
            return False

        for name, removal in worker.items():
            if name in self._removed or name in added or not is_offered(name):
                continue
            if name not in pinned and name not in added and not self._holds_trial(name):
                remove(removal if removal.last_error else self._with_last_error(removal))
        trying: set[str] = set()
        for source, states in external:
            for name, status in states.items():
                if status.state not in REMOVING_STATES or name in self._removed or name in added:
                    continue
                if not is_offered(name):
                    continue
                if isinstance(source, ExternalScope):
                    # Offered while the scope holds it: this worker may ask for its trial.
                    source.note_offered(name)
                if self._may_try(source, name, status):
                    trying.add(name)
                else:
                    reason = status.reason or status.state
                    # An operator's kill switch names its own reason: keep it in the notice.
                    # Otherwise only this run's or worker's error: other agents' error text is
                    # not this run's to read (the notice then says it fails for other agents).
                    forced = status.state is State.FORCED_OPEN
                    error = "" if forced else self._last_error(name)
                    remove(Removal(name, source.scope, reason, error, forced=forced))
        for name in added:
            self._drop_lease(name)
        for name in [name for name in self._fleet_trials if name not in trying]:
            self._fleet_trials.pop(name).release_trial(name, self._owner)
        self._offered, self._unoffered = frozenset(offered), frozenset(unoffered)
        return list(added.values())

    def _last_error(self, name: str) -> str:
        """The error the model can best relate to: this run's own, else its worker's."""
        error = self.run.last_error(name)
        if not error and self.worker is not None:
            error = self.worker.last_error(name)
        return error

    def _with_last_error(self, removal: Removal) -> Removal:
        return replace(removal, last_error=self._last_error(removal.tool))

    def _holds_trial(self, name: str) -> bool:
        """Keep or claim the worker's trial lease for `name`; False if another run has it."""
        assert self.worker is not None
        if name in self._removed:
            return False
        lease = self._leases.get(name)
        if lease is not None and self.worker.holds_trial(lease):
            return True
        lease = self.worker.acquire_trial(name)
        if lease is None:
            self._leases.pop(name, None)
            return False
        self._leases[name] = lease
        return True

    def _may_try(self, source: ScopeSource, name: str, status: ScopeState) -> bool:
        """Keep or claim the wider scope's trial of the half-open `name` (under self._lock)."""
        if not is_lease_trial(status) or not isinstance(source, ExternalScope):
            return False
        if not source.claim_trial(name, self._owner):
            return False
        self._fleet_trials[name] = source
        return True

    def _finish_fleet_trial(self, name: str, outcome: Outcome, error: str) -> None:
        with self._lock:
            source = self._fleet_trials.get(name)
            if source is None or not source.finish_trial(name, self._owner, outcome):
                return
            if outcome not in COUNTED_OUTCOMES:
                return  # success: keep calling it; semantic: keep it while the lease is renewed
            # The trial failed, so the scope is about to re-open it: leave this run now, with
            # the trial's own error (the scope's entry still says half-open).
            del self._fleet_trials[name]
            removal = Removal(name, source.scope, "its half-open trial call failed", error)
            added = [] if name in self._removed else [replace(removal, since=self._clock())]
            self._add(added)
        self._announce(added)

    def _drop_lease(self, name: str) -> None:
        lease = self._leases.pop(name, None)
        if lease is not None and self.worker is not None:
            self.worker.release_trial(lease)
