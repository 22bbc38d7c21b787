"""The fleet breaker rules as plain Python (time as an argument): the reference model that the Lua
scripts in ``breakers/fleet/lua/`` must match (``test_fleet_rules_match_redis`` checks them step for
step). Only tests use it. Why twice: docs/adr/0024-the-fleet-rules-exist-twice-a.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from breaker_panel.vocabulary import Outcome, State
from breakers.fleet.rules import (
    AGENT_HOLDER_PREFIX,
    PROBE_HOLDER,
    STREAK_EVENTS_KEPT,
    CauseKind,
    FleetPolicy,
    Forced,
    NotForcedError,
    OperatorActionKind,
    Transition,
    TrialMode,
    effective_state,
)

__all__ = ["FleetBreaker"]


@dataclass(slots=True)
class FleetBreaker:
    """One tool's fleet breaker. Mutated in place by the operations below.

    One tool's breaker has an *automatic* state and an optional *forced* override:

        closed    -> open       ``threshold`` consecutive retryable failures across the fleet,
                                from at least ``min_workers`` distinct workers (one worker
                                failing alone, however often, never opens it); any success
                                resets the streak
        open      -> half_open  ``advance()`` once the cooldown has elapsed (Celery's tick)
        half_open -> closed     the one trial succeeded: the probe, or the call the agent
                                worker holding the trial lease made under it (``trial=True``,
                                reported while the lease is live); the cooldown goes back to
                                its base
        half_open -> open       the trial failed: the cooldown doubles, capped at ``max_cooldown``

    Semantic and blocked outcomes never count nor reset. While open or half-open, late outcomes
    (calls started before the trip, even the lease holder's) change nothing: only the trial decides.
    The effective state is the forced one when set (``forced_open`` is a kill switch,
    ``forced_closed`` keeps a tool available); the automatic breaker keeps running underneath, so
    ``release()`` returns to what it says now.
    ``reset()`` clears the automatic breaker and leaves a forced state alone.

    Every change of (automatic state, forced) is a ``Transition`` with its cause and bumps ``seq``.
    """

    auto: State = State.CLOSED
    forced: Forced = Forced.NONE
    consecutive: int = 0
    workers: dict[str, int] = field(default_factory=dict)  # failures per worker in the streak
    streak: list[str] = field(default_factory=list)  # the streak's latest event ids
    cooldown_ms: int = 0  # the cooldown now in force; 0 means the policy's base
    open_until: int = 0
    window: int = 0  # counts half-open windows: a probe or lease belongs to one window
    lease_holder: str = ""
    lease_token: str = ""
    lease_until: int = 0
    seq: int = 0
    since: int = 0
    auto_reason: str = ""
    forced_reason: str = ""
    seen: set[str] = field(default_factory=set)  # applied event ids (Redis keeps them with a TTL)

    @property
    def state(self) -> State:
        return effective_state(self.auto, self.forced)

    @property
    def reason(self) -> str:
        return self.forced_reason if self.forced else self.auto_reason

    # -- agent outcomes --------------------------------------------------------------------

    def apply(
        self,
        *,
        event_id: str,
        worker: str,
        outcome: Outcome,
        now: int,
        policy: FleetPolicy,
        trial: bool = False,
        holder: str = "",
    ) -> Transition | None:
        """One accepted ``tool.call``; a resent event id is applied once (returns None).

        ``trial`` is the event's flag, set by the SDK on the one call made under a trial lease.
        ``worker`` is the voter the quorum counts; ``holder`` the worker that made the call, whom
        a trial lease names ("" means ``worker``): workers sharing a token are one voter.
        """
        if event_id in self.seen:
            return None
        self.seen.add(event_id)
        if self.auto is State.CLOSED:
            return self._count(event_id, worker, outcome, now, policy)
        if (
            self.auto is State.HALF_OPEN
            and trial
            and self.lease_holder == AGENT_HOLDER_PREFIX + (holder or worker)
            and now <= self.lease_until
        ):
            return self._agent_trial(event_id, worker, outcome, now, policy)
        # Open, or half-open and not the trial: a late result of a call started before the trip
        # (the holder's too), or a trial reported after its lease ran out, decides nothing.
        return None

    def _count(
        self, event_id: str, worker: str, outcome: Outcome, now: int, policy: FleetPolicy
    ) -> Transition | None:
        if outcome is Outcome.SUCCESS:
            self._clear_streak()
            return None
        if outcome not in (Outcome.RETRYABLE, Outcome.DEGRADED):
            return None
        self.consecutive += 1
        self.workers[worker] = self.workers.get(worker, 0) + 1
        self.streak = [*self.streak, event_id][-STREAK_EVENTS_KEPT:]
        if self.consecutive < policy.threshold or len(self.workers) < policy.min_workers:
            return None
        cause = {
            "consecutive": self.consecutive,
            "workers": dict(self.workers),
            "events": list(self.streak),
            "threshold": policy.threshold,
            "min_workers": policy.min_workers,
            "last_outcome": outcome.value,
        }
        reason = (
            f"{self.consecutive} consecutive retryable failures from {len(self.workers)} workers"
        )
        if outcome is Outcome.DEGRADED:
            reason = (
                f"{self.consecutive} consecutive failures from {len(self.workers)} workers, "
                "the last a degraded result"
            )
        self._clear_streak()
        self.cooldown_ms = policy.cooldown_ms
        return self._open(now, CauseKind.FAILURES, cause, reason)

    def _agent_trial(
        self, event_id: str, worker: str, outcome: Outcome, now: int, policy: FleetPolicy
    ) -> Transition | None:
        if outcome is Outcome.SEMANTIC:
            self._clear_lease()  # the trial said nothing about health: the next caller may try
            return None
        if outcome not in (Outcome.SUCCESS, Outcome.RETRYABLE, Outcome.DEGRADED):
            return None
        cause = {
            "window": self.window,
            "holder": self.lease_holder,
            "outcome": outcome.value,
            "event_id": event_id,
            "worker": worker,
        }
        return self._decide(outcome is Outcome.SUCCESS, "call", now, policy, cause)

    # -- half-open ---------------------------------------------------------------------------

    def advance(self, *, now: int, policy: FleetPolicy) -> Transition | None:
        """open -> half_open once the cooldown has elapsed (Celery's tick calls this)."""
        if self.auto is not State.OPEN or now < self.open_until:
            return None
        auto_from, forced_from = self.auto, self.forced
        self.auto = State.HALF_OPEN
        self.window += 1
        self._clear_lease()
        trial = "probe" if policy.trial is TrialMode.PROBE else "call"
        self.auto_reason = f"cooldown of {_seconds(self.cooldown_ms)} s elapsed; one trial {trial}"
        cause = {"cooldown_ms": self.cooldown_ms, "window": self.window, "trial": policy.trial}
        return self._transition(now, auto_from, forced_from, CauseKind.COOLDOWN, cause)

    def acquire_trial(
        self,
        *,
        holder: str,
        token: str,
        now: int,
        ttl_ms: int,
        policy: FleetPolicy,
        window: int | None = None,
    ) -> bool:
        """Grant the one trial of this half-open window to ``holder``, if nobody holds it.

        ``holder`` is ``PROBE_HOLDER`` (a Celery probe task, which names the window it was sent
        for) or ``"agent:<worker_id>"`` (tools without a probe; refused while forced, when the
        operator decides). An agent holding a live lease that asks again gets it again; a probe
        never does, so a duplicated probe task cannot make a second trial.
        """
        if self.auto is not State.HALF_OPEN:
            return False
        if holder == PROBE_HOLDER:
            if policy.trial is not TrialMode.PROBE or window != self.window:
                return False
        elif policy.trial is not TrialMode.LEASE or self.forced:
            return False
        if self.lease_holder and now < self.lease_until:
            return holder == self.lease_holder and holder != PROBE_HOLDER
        self.lease_holder, self.lease_token, self.lease_until = holder, token, now + ttl_ms
        return True

    def finish_probe(
        self, *, token: str, ok: bool, now: int, policy: FleetPolicy
    ) -> Transition | None:
        """The probe holding ``token`` reports: success closes, failure re-opens (backed off)."""
        if (
            self.auto is not State.HALF_OPEN
            or self.lease_holder != PROBE_HOLDER
            or self.lease_token != token
        ):
            return None  # a stale probe (its window is over, or its lease was re-granted)
        cause = {"window": self.window, "holder": PROBE_HOLDER, "outcome": _ok(ok)}
        return self._decide(ok, "probe", now, policy, cause)

    def _decide(
        self, ok: bool, trial: str, now: int, policy: FleetPolicy, cause: dict[str, Any]
    ) -> Transition:
        self._clear_lease()
        if ok:
            auto_from, forced_from = self.auto, self.forced
            self.auto = State.CLOSED
            self.cooldown_ms = policy.cooldown_ms
            self._clear_streak()
            self.auto_reason = f"trial {trial} succeeded"
            return self._transition(now, auto_from, forced_from, CauseKind.TRIAL, cause)
        current = self.cooldown_ms or policy.cooldown_ms
        self.cooldown_ms = min(current * 2, policy.max_cooldown_ms)
        reason = f"trial {trial} failed; next cooldown {_seconds(self.cooldown_ms)} s"
        return self._open(now, CauseKind.TRIAL, {**cause, "cooldown_ms": self.cooldown_ms}, reason)

    # -- operators ---------------------------------------------------------------------------

    def operate(
        self, *, action: OperatorActionKind, reason: str, now: int, policy: FleetPolicy
    ) -> Transition | None:
        """An operator's fleet-wide action; None when it changes no state (still audited)."""
        auto_from, forced_from = self.auto, self.forced
        if action is OperatorActionKind.FORCE_OPEN:
            self.forced, self.forced_reason = Forced.OPEN, f"forced open by an operator: {reason}"
        elif action is OperatorActionKind.FORCE_CLOSE:
            self.forced = Forced.CLOSED
            self.forced_reason = f"forced closed by an operator: {reason}"
        elif action is OperatorActionKind.RELEASE:
            if not self.forced:
                raise NotForcedError("the breaker is not forced")
            self.forced, self.forced_reason = Forced.NONE, ""
        else:
            self._clear_streak()
            self._clear_lease()
            self.cooldown_ms = policy.cooldown_ms
            if self.auto is not State.CLOSED:
                self.auto, self.auto_reason = State.CLOSED, f"reset by an operator: {reason}"
        if (auto_from, forced_from) == (self.auto, self.forced):
            return None
        cause = {"action": action.value, "reason": reason}
        return self._transition(now, auto_from, forced_from, CauseKind.OPERATOR, cause)

    # -- internals ---------------------------------------------------------------------------

    def _open(self, now: int, kind: CauseKind, cause: dict[str, Any], reason: str) -> Transition:
        auto_from, forced_from = self.auto, self.forced
        self.auto, self.auto_reason = State.OPEN, reason
        self.open_until = now + self.cooldown_ms
        return self._transition(now, auto_from, forced_from, kind, cause)

    def _transition(
        self,
        now: int,
        auto_from: State,
        forced_from: Forced,
        kind: CauseKind,
        cause: dict[str, Any],
    ) -> Transition:
        from_state = effective_state(auto_from, forced_from)
        self.seq += 1
        if from_state is not self.state:
            self.since = now
        return Transition(
            self.seq,
            now,
            from_state,
            self.state,
            auto_from,
            self.auto,
            self.forced,
            kind,
            cause,
            self.reason,
        )

    def _clear_streak(self) -> None:
        self.consecutive, self.workers, self.streak = 0, {}, []

    def _clear_lease(self) -> None:
        self.lease_holder, self.lease_token, self.lease_until = "", "", 0


def _seconds(ms: int) -> str:
    # Same text as the Lua scripts: integral seconds without a fraction, else up to 3 decimals.
    return str(ms // 1000) if ms % 1000 == 0 else f"{ms / 1000:.3f}".rstrip("0")


def _ok(ok: bool) -> str:
    return "success" if ok else "failure"
