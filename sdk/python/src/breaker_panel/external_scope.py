"""The wider scopes a run hears of (`ScopeSource`: the fleet state the ControlPlane client caches)
and the fleet trial lease: while this worker holds it, `ExternalScope` hands it to one run, the
first to ask that still has the tool, whose next call of the tool is the trial.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Protocol

from breaker_panel.core import Clock, Outcome, Scope, State
from breaker_panel.vocabulary import COUNTED_OUTCOMES

# Which states of a wider scope take a tool out of a run. A fleet half_open is removed too,
# except from the one run that holds this worker's trial lease (`ExternalScope.claim_trial()`):
# a probe-driven half_open (trial "probe") is decided by the control plane, never by a run.
REMOVING_STATES = frozenset({State.OPEN, State.HALF_OPEN, State.FORCED_OPEN})


# `ScopeState.trial` of a half-open tool without a probe: one agent call, under a lease, decides.
LEASE_TRIAL = "lease"

# How long a tool this worker's runs offered counts as one they offer, for its trial lease: as
# long as the fleet's longest default cooldown, so a tool offered just before the fleet opened
# it is still wanted when its trial comes (runs that keep offering it keep it wanted).
DEFAULT_OFFER_MEMORY = 300.0


@dataclass(frozen=True, slots=True)
class ScopeState:
    """One tool's state in a wider scope, as that scope's source last heard it.

    `trial` says who makes a half-open tool's one trial (`"probe"`, or `LEASE_TRIAL`); `since`
    is when the scope's state last changed, so a new half-open window never looks like the last.
    """

    state: State
    reason: str = ""
    last_error: str = ""
    trial: str = ""
    since: str = ""


def same_window(a: ScopeState | None, b: ScopeState | None) -> bool:
    """Is `b` the same entry as `a` for a trial lease? A half-open window is named by when it
    began (`since`): its reason, last error or trial field may read differently from one answer
    to the next (late results of other workers; the database's view while Redis is away), and
    none of that is a new window. Forgetting a trial already made would make a second one."""
    if a is None or b is None:
        return a is b
    if a.state is State.HALF_OPEN and b.state is State.HALF_OPEN and a.since and b.since:
        return a.since == b.since
    return a == b or replace(a, last_error="") == replace(b, last_error="")


def is_lease_trial(status: ScopeState | None) -> bool:
    return status is not None and status.state is State.HALF_OPEN and status.trial == LEASE_TRIAL


class ScopeSource(Protocol):
    """A scope a run obeys besides its own and its worker's, e.g. the fleet.

    `snapshot()` is called on every step and must answer from memory (no network): the
    ControlPlane client refreshes it from a background thread.
    """

    @property
    def scope(self) -> Scope: ...

    def snapshot(self) -> Mapping[str, ScopeState]: ...


@dataclass(frozen=True, slots=True)
class FleetLease:
    """This worker's grant of a wider scope's half-open trial of `tool`, on the local clock."""

    tool: str
    window: int  # the scope's count of half-open windows, as the grant named it
    expires_at: float


class TrialPhase(StrEnum):
    GRANTED = "granted"  # the lease is live: the run holding it (or the first to ask) may call
    RENEW = "renew"  # its call was semantic, which frees the lease server-side: ask it back
    PASSED = "passed"  # its call succeeded: the scope closes once the control plane has the event
    FAILED = "failed"  # its call failed (retryable): the scope re-opens with a longer cooldown


@dataclass(slots=True)
class Trial:
    lease: FleetLease
    phase: TrialPhase = TrialPhase.GRANTED
    holder: int | None = None  # the run (its `RunBreakers` owner number) making the trial call
    since: str = ""  # the half-open window it was granted for (its scope entry's `since`)


class ExternalScope:
    """A ready-made ScopeSource: whoever syncs the scope calls `update()` with the new states.

    It also keeps this worker's half-open trial leases of the scope (tools whose `trial` is
    `LEASE_TRIAL`), which the syncing side asks for (`trials_to_request()`, then `grant_trial()`
    or `refuse_trial()`) and runs take (`claim_trial()`, `finish_trial()`, `release_trial()`).
    Only tools this worker's runs offered in the last `offer_memory` seconds are asked for
    (`note_offered()`): a worker never takes, nor names, another agent's trial.
    A lease lives as long as the tool's entry is unchanged and its `expires_at` has not passed:

        granted -> holder   the first run to ask while the lease is live holds it; it keeps the
                            tool in `available()`, every other run has it removed
        holder  -> passed   its call succeeded: every run not already without it may call it
                            (this worker's later calls reach the control plane after the trial)
        holder  -> failed   its call failed (retryable): the holder loses the tool as well
        holder  -> renew    its call was semantic (no verdict); the holder keeps the tool while
                            the lease is asked for again (refused: dropped)
        any     -> gone     the entry changed (the scope decided, or moved on) or time ran out;
                            a passed or failed trial is not asked for again until then, nor
                            ever in the window (`since`) it was made in, even if a late
                            answer brings that window back

    Thread-safe; `snapshot()` and `version` are read without the lock.
    """

    def __init__(
        self,
        scope: Scope = Scope.FLEET,
        *,
        clock: Clock = time.monotonic,
        offer_memory: float = DEFAULT_OFFER_MEMORY,
    ) -> None:
        self._scope = scope
        self.clock = clock
        self.offer_memory = offer_memory
        self._lock = threading.Lock()
        self._states: Mapping[str, ScopeState] = MappingProxyType({})
        self._trials: dict[str, Trial] = {}
        self._refused: dict[str, float] = {}  # tool -> when to ask for its lease again
        self._offered: dict[str, float] = {}  # tool -> when a run of this worker last offered it
        # tool -> the half-open window whose trial this worker has made, as this worker saw it
        # (`since`) and as the control plane's grant named it (`window`): never asked for, nor
        # taken, again. The two differ when the fleet moved on while the lease was asked for: a
        # lease is granted for the control plane's current window, whatever the asker last saw.
        self._spent: dict[str, tuple[str, int]] = {}
        # Called (outside the lock) when a run offers a half-open tool whose lease this worker
        # should ask for now: the syncing side asks at once instead of at its next poll.
        self.on_trial_wanted: Callable[[], None] | None = None
        self.version = 0  # bumped on every change a run may see, so runs can skip re-reading

    @property
    def scope(self) -> Scope:
        return self._scope

    def update(self, states: Mapping[str, ScopeState]) -> None:
        new = dict(states)
        with self._lock:
            old = self._states
            if new == old:
                return  # most replies repeat the last state: let runs stay on their fast path
            for name in [n for n in self._trials if not same_window(new.get(n), old.get(n))]:
                del self._trials[name]
            for name in [n for n in self._refused if not same_window(new.get(n), old.get(n))]:
                del self._refused[name]
            # One reference swap: readers on other threads see the old or the new map, never half.
            self._states = MappingProxyType(new)
            self.version += 1

    def snapshot(self) -> Mapping[str, ScopeState]:
        return self._states

    # -- the half-open trial lease: the syncing side ---------------------------------------

    def note_offered(self, name: str) -> None:
        """A run of this worker offered `name` (in its tools) while this scope held it."""
        now = self.clock()
        with self._lock:
            self._offered[name] = now
            wanted = self._wants_lease(name, self._states.get(name), now)
        if wanted and self.on_trial_wanted is not None:
            self.on_trial_wanted()

    def trials_to_request(self) -> list[tuple[str, ScopeState]]:
        """Half-open tools this worker's runs offer whose lease to ask for now, each with the
        entry it is asked for."""
        now = self.clock()
        wanted = []
        with self._lock:
            for name in [n for n, at in self._offered.items() if now - at > self.offer_memory]:
                del self._offered[name]  # no run offered it lately: not ours to try
            for name in self._offered:
                status = self._states.get(name)
                if status is None or not is_lease_trial(status):
                    continue
                trial = self._trials.get(name)
                if trial is not None and now >= trial.lease.expires_at:
                    self._end(name)  # unused, or its verdict never came back: ask again
                    trial = None
                if trial is None:
                    if now >= self._refused.get(name, now) and not self._is_spent(name, status):
                        wanted.append((name, status))
                elif trial.phase is TrialPhase.RENEW:
                    wanted.append((name, status))
        return wanted

    def offers_a_lease_trial(self) -> bool:
        """Is a tool this worker's runs offer half-open for an agent's trial?"""
        with self._lock:
            return any(is_lease_trial(self._states.get(name)) for name in self._offered)

    def _wants_lease(self, name: str, status: ScopeState | None, now: float) -> bool:
        """Would `trials_to_request()` ask for `name` now (under the lock; offered already)?"""
        if status is None or not is_lease_trial(status):
            return False
        trial = self._trials.get(name)
        if trial is None:
            return now >= self._refused.get(name, now) and not self._is_spent(name, status)
        return trial.phase is TrialPhase.RENEW or now >= trial.lease.expires_at

    def grant_trial(self, name: str, status: ScopeState, *, window: int, expires_at: float) -> bool:
        """The control plane granted the lease asked for `status`; False if the entry moved on."""
        with self._lock:
            if not same_window(self._states.get(name), status):
                return False  # the scope changed while we asked: the grant is for a past window
            spent = self._spent.get(name)
            if self._is_spent(name, status) or (spent is not None and spent[1] == window):
                # This worker made that window's trial already (the grant repeats its own live
                # lease): not again; asked again when this worker sees a new window.
                self._refused[name] = float("inf")
                return False
            lease = FleetLease(name, window, expires_at)
            trial = self._trials.get(name)
            if trial is not None and trial.phase in (TrialPhase.GRANTED, TrialPhase.RENEW):
                trial.lease, trial.phase = lease, TrialPhase.GRANTED  # renewed: same holder
            else:
                self._trials[name] = Trial(lease, since=status.since)
            self._refused.pop(name, None)
            self.version += 1
        return True

    def refuse_trial(self, name: str, status: ScopeState, *, retry_at: float) -> None:
        """Another worker holds the lease (or the tool is no longer half-open)."""
        with self._lock:
            if not same_window(self._states.get(name), status):
                return
            trial = self._trials.get(name)
            if trial is not None and trial.phase is TrialPhase.RENEW:
                self._end(name)  # another worker took the lease our semantic call freed
            self._refused[name] = retry_at

    def trials(self) -> Mapping[str, FleetLease]:
        """The leases this worker holds and has not used yet (as granted; may have expired)."""
        with self._lock:
            return MappingProxyType(
                {
                    name: trial.lease
                    for name, trial in self._trials.items()
                    if trial.phase in (TrialPhase.GRANTED, TrialPhase.RENEW)
                }
            )

    # -- the half-open trial lease: runs -------------------------------------------------------

    def claim_trial(self, name: str, owner: int) -> bool:
        """May run `owner` call the half-open `name`? The first to ask while the lease is live
        becomes its holder; after a passed trial every run may."""
        now = self.clock()
        with self._lock:
            trial = self._trials.get(name)
            if trial is None or trial.phase is TrialPhase.FAILED:
                return False
            if trial.phase is TrialPhase.PASSED:
                return True
            if now >= trial.lease.expires_at:
                self._end(name)
                return False
            if trial.holder is None:
                trial.holder = owner
            return trial.holder == owner

    def holds_trial(self, name: str, owner: int) -> bool:
        """Would a call of `name` by run `owner` be the trial call (see `finish_trial()`)?"""
        with self._lock:
            return is_holder(self._trials.get(name), owner)

    def finish_trial(self, name: str, owner: int, outcome: Outcome) -> bool:
        """Run `owner` reports a call of `name`; True if it was the trial call."""
        with self._lock:
            trial = self._trials.get(name)
            if trial is None or not is_holder(trial, owner):
                return False
            if outcome is Outcome.SEMANTIC:
                trial.phase = TrialPhase.RENEW  # per the control plane's rule: no verdict
            elif outcome is Outcome.SUCCESS:
                trial.phase = TrialPhase.PASSED
                self.version += 1
            elif outcome in COUNTED_OUTCOMES:
                trial.phase, trial.holder = TrialPhase.FAILED, None
                self.version += 1
            else:
                return False
            if trial.phase is not TrialPhase.RENEW:
                self._spent[name] = (trial.since, trial.lease.window)
            return True

    def release_trial(self, name: str, owner: int) -> None:
        """Run `owner` is over: an unused lease goes to the next run that asks."""
        with self._lock:
            trial = self._trials.get(name)
            if trial is not None and trial.holder == owner:
                trial.holder = None

    def _is_spent(self, name: str, status: ScopeState) -> bool:
        spent = self._spent.get(name)
        return bool(status.since) and spent is not None and spent[0] == status.since

    def _end(self, name: str) -> None:
        del self._trials[name]
        self.version += 1


def is_holder(trial: Trial | None, owner: int) -> bool:
    # A passed trial lets every run call the tool, but only the holder's first call decides.
    return (
        trial is not None
        and trial.holder == owner
        and trial.phase in (TrialPhase.GRANTED, TrialPhase.RENEW)
    )
