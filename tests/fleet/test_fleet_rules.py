"""The fleet rules as the pure reference model states them (no Django, no Redis, no clock)."""

from __future__ import annotations

import itertools

import pytest

from breaker_panel.core import Outcome, State
from breakers.fleet.rules import (
    PROBE_HOLDER,
    CauseKind,
    FleetPolicy,
    Forced,
    NotForcedError,
    OperatorActionKind,
    TrialMode,
)
from tests.fleet.reference_model import FleetBreaker

POLICY = FleetPolicy(threshold=5, cooldown_ms=30_000, max_cooldown_ms=100_000, min_workers=2)
PROBED = FleetPolicy(
    threshold=5, cooldown_ms=30_000, max_cooldown_ms=100_000, trial=TrialMode.PROBE
)
_ids = itertools.count()


def fail(
    breaker: FleetBreaker,
    worker: str,
    *,
    now: int = 0,
    policy: FleetPolicy = POLICY,
    trial: bool = False,
):
    return breaker.apply(
        event_id=f"e{next(_ids)}",
        worker=worker,
        outcome=Outcome.RETRYABLE,
        now=now,
        policy=policy,
        trial=trial,
    )


def opened(policy: FleetPolicy = POLICY, now: int = 0) -> FleetBreaker:
    breaker = FleetBreaker()
    for worker in ["w1", "w2", "w1", "w2", "w1"]:
        fail(breaker, worker, now=now, policy=policy)
    assert breaker.auto is State.OPEN
    return breaker


def test_one_worker_failing_alone_never_opens_the_fleet_breaker() -> None:
    breaker = FleetBreaker()
    for _ in range(500):
        assert fail(breaker, "misconfigured") is None
    assert breaker.state is State.CLOSED
    assert breaker.consecutive == 500


def test_opens_at_the_threshold_once_two_workers_contributed() -> None:
    breaker = FleetBreaker()
    for worker in ["w1", "w1", "w1", "w1"]:
        assert fail(breaker, worker, now=10) is None
    change = fail(breaker, "w2", now=10)
    assert change is not None
    assert (change.from_state, change.to_state, change.kind) == (
        State.CLOSED,
        State.OPEN,
        CauseKind.FAILURES,
    )
    assert change.cause["workers"] == {"w1": 4, "w2": 1}
    assert len(change.cause["events"]) == 5
    assert change.reason == "5 consecutive retryable failures from 2 workers"
    assert breaker.open_until == 10 + 30_000


def test_a_lone_worker_streak_opens_as_soon_as_a_second_worker_fails() -> None:
    breaker = FleetBreaker()
    for _ in range(12):
        fail(breaker, "w1")
    change = fail(breaker, "w2")
    assert change is not None and change.cause["consecutive"] == 13


def test_any_success_resets_the_streak_and_its_workers() -> None:
    breaker = FleetBreaker()
    for worker in ["w1", "w2", "w1", "w2"]:
        fail(breaker, worker)
    breaker.apply(event_id="ok", worker="w3", outcome=Outcome.SUCCESS, now=0, policy=POLICY)
    assert (breaker.consecutive, breaker.workers) == (0, {})
    for _ in range(4):
        fail(breaker, "w1")
    assert breaker.state is State.CLOSED


@pytest.mark.parametrize("outcome", [Outcome.SEMANTIC, Outcome.BLOCKED])
def test_semantic_and_blocked_outcomes_neither_count_nor_reset(outcome: Outcome) -> None:
    breaker = FleetBreaker()
    for worker in ["w1", "w2", "w1", "w2"]:
        fail(breaker, worker)
    breaker.apply(event_id="sem", worker="w1", outcome=outcome, now=0, policy=POLICY)
    assert breaker.consecutive == 4
    assert fail(breaker, "w1") is not None


def test_a_resent_event_is_applied_once() -> None:
    breaker = FleetBreaker()
    for _ in range(3):
        breaker.apply(event_id="same", worker="w1", outcome=Outcome.RETRYABLE, now=0, policy=POLICY)
    assert breaker.consecutive == 1


def test_late_results_while_open_change_nothing() -> None:
    breaker = opened()
    breaker.apply(event_id="late", worker="w3", outcome=Outcome.SUCCESS, now=5, policy=POLICY)
    assert breaker.state is State.OPEN


def test_half_open_after_the_cooldown_and_not_before() -> None:
    breaker = opened(now=0)
    assert breaker.advance(now=29_999, policy=POLICY) is None
    change = breaker.advance(now=30_000, policy=POLICY)
    assert change is not None and change.to_state is State.HALF_OPEN
    assert (breaker.window, change.reason) == (1, "cooldown of 30 s elapsed; one trial call")
    assert breaker.advance(now=30_001, policy=POLICY) is None  # a duplicated tick moves nothing


def test_one_agent_holds_the_trial_lease_and_its_success_closes() -> None:
    breaker = opened()
    breaker.advance(now=30_000, policy=POLICY)
    assert breaker.acquire_trial(
        holder="agent:w1", token="a", now=30_000, ttl_ms=1000, policy=POLICY
    )
    assert not breaker.acquire_trial(
        holder="agent:w2", token="b", now=30_500, ttl_ms=1000, policy=POLICY
    )
    # Another worker's result decides nothing, even flagged as a trial; the holder's trial does.
    breaker.apply(
        event_id="x", worker="w2", outcome=Outcome.SUCCESS, now=30_600, policy=POLICY, trial=True
    )
    assert breaker.state is State.HALF_OPEN
    change = breaker.apply(
        event_id="y", worker="w1", outcome=Outcome.SUCCESS, now=30_700, policy=POLICY, trial=True
    )
    assert change is not None and change.to_state is State.CLOSED
    assert change.cause["event_id"] == "y" and change.cause["worker"] == "w1"


def test_only_the_holders_trial_call_under_a_live_lease_decides_the_half_open_window() -> None:
    breaker = opened()
    breaker.advance(now=30_000, policy=POLICY)
    assert breaker.acquire_trial(
        holder="agent:w1", token="a", now=30_000, ttl_ms=1000, policy=POLICY
    )
    # A late failure of a call w1 started before the trip is not the trial.
    assert fail(breaker, "w1", now=30_100) is None
    semantic = breaker.apply(
        event_id="late-sem", worker="w1", outcome=Outcome.SEMANTIC, now=30_150, policy=POLICY
    )
    assert semantic is None and breaker.lease_holder == "agent:w1"  # the lease is kept
    assert breaker.state is State.HALF_OPEN
    change = fail(breaker, "w1", now=30_200, trial=True)
    assert change is not None and change.to_state is State.OPEN
    assert change.kind is CauseKind.TRIAL


def test_a_trial_reported_after_its_lease_expired_decides_nothing() -> None:
    breaker = opened()
    breaker.advance(now=30_000, policy=POLICY)
    breaker.acquire_trial(holder="agent:w1", token="a", now=30_000, ttl_ms=1000, policy=POLICY)
    assert fail(breaker, "w1", now=31_001, trial=True) is None
    assert breaker.state is State.HALF_OPEN
    # The next caller gets the lease; its trial, on time, decides.
    assert breaker.acquire_trial(
        holder="agent:w2", token="b", now=31_002, ttl_ms=1000, policy=POLICY
    )
    assert fail(breaker, "w2", now=32_002, trial=True) is not None  # live up to lease_until


def test_an_expired_lease_goes_to_the_next_caller() -> None:
    breaker = opened()
    breaker.advance(now=30_000, policy=POLICY)
    breaker.acquire_trial(holder="agent:w1", token="a", now=30_000, ttl_ms=1000, policy=POLICY)
    assert breaker.acquire_trial(
        holder="agent:w2", token="b", now=31_000, ttl_ms=1000, policy=POLICY
    )


def test_a_failed_trial_reopens_with_a_cooldown_that_backs_off_up_to_the_cap() -> None:
    breaker = opened()
    now, cooldowns = 0, []
    for _ in range(4):
        now = breaker.open_until
        breaker.advance(now=now, policy=POLICY)
        breaker.acquire_trial(holder="agent:w1", token="t", now=now, ttl_ms=1000, policy=POLICY)
        change = fail(breaker, "w1", now=now, trial=True)
        assert change is not None and change.to_state is State.OPEN
        cooldowns.append(breaker.cooldown_ms)
    assert cooldowns == [60_000, 100_000, 100_000, 100_000]
    assert change.reason == "trial call failed; next cooldown 100 s"


def test_a_probe_needs_its_window_and_only_one_probe_runs_per_window() -> None:
    breaker = opened(PROBED)
    breaker.advance(now=30_000, policy=PROBED)
    assert not breaker.acquire_trial(
        holder="agent:w1", token="a", now=30_000, ttl_ms=1000, policy=PROBED
    )
    assert not breaker.acquire_trial(
        holder=PROBE_HOLDER, token="old", now=30_000, ttl_ms=1000, policy=PROBED, window=0
    )
    assert breaker.acquire_trial(
        holder=PROBE_HOLDER, token="p1", now=30_000, ttl_ms=1000, policy=PROBED, window=1
    )
    assert not breaker.acquire_trial(
        holder=PROBE_HOLDER, token="p2", now=30_001, ttl_ms=1000, policy=PROBED, window=1
    )
    assert breaker.finish_probe(token="p2", ok=True, now=30_002, policy=PROBED) is None
    change = breaker.finish_probe(token="p1", ok=True, now=30_003, policy=PROBED)
    assert change is not None and change.to_state is State.CLOSED
    assert change.reason == "trial probe succeeded"


def test_forced_states_override_the_automatic_breaker_until_released() -> None:
    breaker = FleetBreaker()
    change = breaker.operate(
        action=OperatorActionKind.FORCE_OPEN, reason="vendor says down", now=5, policy=POLICY
    )
    assert change is not None and change.to_state is State.FORCED_OPEN
    assert breaker.reason == "forced open by an operator: vendor says down"
    # The automatic breaker keeps counting underneath.
    for worker in ["w1", "w2", "w1", "w2", "w1"]:
        fail(breaker, worker, now=6)
    assert (breaker.state, breaker.auto) == (State.FORCED_OPEN, State.OPEN)
    change = breaker.operate(action=OperatorActionKind.RELEASE, reason="ok", now=7, policy=POLICY)
    assert change is not None and (change.from_state, change.to_state) == (
        State.FORCED_OPEN,
        State.OPEN,
    )
    with pytest.raises(NotForcedError):
        breaker.operate(action=OperatorActionKind.RELEASE, reason="again", now=8, policy=POLICY)


def test_forced_closed_keeps_the_tool_available_and_refuses_agent_trials() -> None:
    breaker = opened()
    breaker.operate(action=OperatorActionKind.FORCE_CLOSE, reason="keep it", now=1, policy=POLICY)
    assert breaker.state is State.FORCED_CLOSED and breaker.forced is Forced.CLOSED
    breaker.advance(now=30_000, policy=POLICY)
    assert breaker.auto is State.HALF_OPEN
    assert not breaker.acquire_trial(
        holder="agent:w1", token="a", now=30_000, ttl_ms=1000, policy=POLICY
    )


def test_reset_closes_the_automatic_breaker_and_leaves_a_forced_state() -> None:
    breaker = opened()
    breaker.operate(action=OperatorActionKind.FORCE_OPEN, reason="x", now=1, policy=POLICY)
    change = breaker.operate(action=OperatorActionKind.RESET, reason="fixed", now=2, policy=POLICY)
    assert change is not None and change.auto_to is State.CLOSED
    assert breaker.state is State.FORCED_OPEN
    # Resetting a closed breaker only clears counters: no transition.
    fail(breaker, "w1")
    assert (
        breaker.operate(action=OperatorActionKind.RESET, reason="y", now=3, policy=POLICY) is None
    )
    assert breaker.consecutive == 0


def test_every_transition_bumps_seq_and_since_moves_with_the_effective_state() -> None:
    breaker = opened(now=100)
    assert (breaker.seq, breaker.since) == (1, 100)
    breaker.operate(action=OperatorActionKind.FORCE_CLOSE, reason="x", now=200, policy=POLICY)
    breaker.advance(now=30_100, policy=POLICY)  # auto changes under the forced state
    assert (breaker.seq, breaker.since) == (3, 200)
