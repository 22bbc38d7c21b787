"""WorkerBreakers: worker scope, with cooldown, one half-open trial and capped back-off."""

from __future__ import annotations

import pytest

from breaker_panel import Scope, State, ToolFailure, WorkerBreakers
from breaker_panel.worker import TrialLease
from tests.sdk.support import FakeClock, TransitionLog

DOWN = ToolFailure("503 from vendor", retryable=True, attempts=5)
BAD_ARGS = ToolFailure("400 bad query", retryable=False)


@pytest.fixture
def worker(clock: FakeClock, transitions: TransitionLog) -> WorkerBreakers:
    return WorkerBreakers(clock=clock, on_transition=transitions)


def trip(worker: WorkerBreakers, name: str = "web_search") -> None:
    for _ in range(worker.policy.threshold):
        worker.record_failure(name, DOWN)


def trial(worker: WorkerBreakers, clock: FakeClock, name: str = "web_search") -> TrialLease:
    clock.advance(worker.cooldown(name))
    lease = worker.acquire_trial(name)
    assert lease is not None
    return lease


def test_defaults_match_the_design() -> None:
    worker = WorkerBreakers()
    assert worker.policy.threshold == 5
    assert worker.policy.cooldown == 30
    assert worker.policy.max_cooldown == 300


def test_five_consecutive_failures_across_runs_open_it(worker: WorkerBreakers) -> None:
    trip(worker)
    assert worker.state("web_search") is State.OPEN
    assert worker.is_open("web_search")
    assert worker.open_tools() == ("web_search",)
    assert worker.removals()["web_search"].scope is Scope.WORKER


def test_a_success_resets_the_count(worker: WorkerBreakers) -> None:
    for _ in range(4):
        worker.record_failure("web_search", DOWN)
    worker.record_success("web_search")
    assert worker.consecutive("web_search") == 0
    assert worker.state("web_search") is State.CLOSED


def test_semantic_failures_do_not_touch_worker_state(worker: WorkerBreakers) -> None:
    for _ in range(4):
        worker.record_failure("web_search", DOWN)
    for _ in range(10):
        worker.record_failure("web_search", BAD_ARGS)
    assert worker.consecutive("web_search") == 4
    assert worker.state("web_search") is State.CLOSED


def test_a_plain_exception_counts_as_retryable(worker: WorkerBreakers) -> None:
    for _ in range(5):
        worker.record_failure("web_search", TimeoutError("read timed out"))
    assert worker.is_open("web_search")


def test_no_trial_before_the_cooldown(worker: WorkerBreakers, clock: FakeClock) -> None:
    trip(worker)
    clock.advance(29.9)
    assert worker.acquire_trial("web_search") is None
    assert worker.state("web_search") is State.OPEN


def test_after_the_cooldown_exactly_one_trial(worker: WorkerBreakers, clock: FakeClock) -> None:
    trip(worker)
    clock.advance(30)
    assert worker.acquire_trial("web_search") is not None
    assert worker.acquire_trial("web_search") is None
    assert worker.state("web_search") is State.HALF_OPEN
    assert worker.is_open("web_search")


def test_a_closed_tool_needs_no_trial(worker: WorkerBreakers) -> None:
    assert worker.acquire_trial("web_search") is None
    worker.record_failure("web_search", DOWN)
    assert worker.acquire_trial("web_search") is None


def test_trial_success_closes_it(
    worker: WorkerBreakers, clock: FakeClock, transitions: TransitionLog
) -> None:
    trip(worker)
    lease = trial(worker, clock)
    worker.record_success("web_search", lease=lease)
    assert worker.state("web_search") is State.CLOSED
    assert not worker.is_open("web_search")
    assert worker.consecutive("web_search") == 0
    assert transitions.moves() == [
        ("web_search", "worker", "closed", "open"),
        ("web_search", "worker", "open", "half_open"),
        ("web_search", "worker", "half_open", "closed"),
    ]


def test_trial_failure_reopens_and_doubles_the_cooldown(
    worker: WorkerBreakers, clock: FakeClock, transitions: TransitionLog
) -> None:
    trip(worker)
    lease = trial(worker, clock)
    worker.record_failure("web_search", ToolFailure("504 gateway timeout"), lease=lease)
    assert worker.state("web_search") is State.OPEN
    assert worker.cooldown("web_search") == 60
    assert transitions.moves()[-1] == ("web_search", "worker", "half_open", "open")
    assert worker.removals()["web_search"].last_error == "ToolFailure: 504 gateway timeout"
    clock.advance(59)
    assert worker.acquire_trial("web_search") is None
    clock.advance(1)
    assert worker.acquire_trial("web_search") is not None


def test_the_cooldown_backs_off_up_to_its_cap(worker: WorkerBreakers, clock: FakeClock) -> None:
    trip(worker)
    seen = []
    for _ in range(6):
        lease = trial(worker, clock)
        worker.record_failure("web_search", DOWN, lease=lease)
        seen.append(worker.cooldown("web_search"))
    assert seen == [60, 120, 240, 300, 300, 300]


def test_closing_resets_the_cooldown(worker: WorkerBreakers, clock: FakeClock) -> None:
    trip(worker)
    for _ in range(3):
        worker.record_failure("web_search", DOWN, lease=trial(worker, clock))
    worker.record_success("web_search", lease=trial(worker, clock))
    assert worker.cooldown("web_search") == 30
    trip(worker)
    assert worker.cooldown("web_search") == 30


def test_a_semantic_trial_result_keeps_the_lease(worker: WorkerBreakers, clock: FakeClock) -> None:
    trip(worker)
    lease = trial(worker, clock)
    worker.record_failure("web_search", BAD_ARGS, lease=lease)
    assert worker.state("web_search") is State.HALF_OPEN
    assert worker.holds_trial(lease)


def test_late_results_without_the_lease_decide_nothing(
    worker: WorkerBreakers, clock: FakeClock
) -> None:
    trip(worker)
    worker.record_success("web_search")  # a call that started before the trip
    assert worker.state("web_search") is State.OPEN
    lease = trial(worker, clock)
    worker.record_success("web_search")
    worker.record_failure("web_search", DOWN)
    assert worker.state("web_search") is State.HALF_OPEN
    assert worker.holds_trial(lease)


def test_a_stale_lease_decides_nothing(worker: WorkerBreakers, clock: FakeClock) -> None:
    trip(worker)
    first = trial(worker, clock)
    clock.advance(worker.trial_lease)
    second = worker.acquire_trial("web_search")
    assert second is not None
    assert not worker.holds_trial(first)
    worker.record_success("web_search", lease=first)
    assert worker.state("web_search") is State.HALF_OPEN
    worker.record_success("web_search", lease=second)
    assert worker.state("web_search") is State.CLOSED


def test_an_expired_lease_passes_to_the_next_caller_without_a_transition(
    worker: WorkerBreakers, clock: FakeClock, transitions: TransitionLog
) -> None:
    trip(worker)
    trial(worker, clock)
    clock.advance(worker.trial_lease - 1)
    assert worker.acquire_trial("web_search") is None
    clock.advance(1)
    assert worker.acquire_trial("web_search") is not None
    assert [move[3] for move in transitions.moves()] == ["open", "half_open"]


def test_an_expired_but_unclaimed_lease_still_counts(
    worker: WorkerBreakers, clock: FakeClock
) -> None:
    trip(worker)
    lease = trial(worker, clock)
    clock.advance(worker.trial_lease * 3)  # the trial call was slow, nobody else asked
    worker.record_success("web_search", lease=lease)
    assert worker.state("web_search") is State.CLOSED


def test_a_released_lease_goes_to_the_next_caller_at_once(
    worker: WorkerBreakers, clock: FakeClock
) -> None:
    trip(worker)
    lease = trial(worker, clock)
    worker.release_trial(lease)
    assert not worker.holds_trial(lease)
    assert worker.acquire_trial("web_search") is not None


def test_tools_are_independent(worker: WorkerBreakers, clock: FakeClock) -> None:
    trip(worker, "web_search")
    worker.record_failure("fetch_url", DOWN)
    assert worker.open_tools() == ("web_search",)
    assert worker.consecutive("fetch_url") == 1


def test_transition_reasons_explain_themselves(
    worker: WorkerBreakers, clock: FakeClock, transitions: TransitionLog
) -> None:
    trip(worker)
    worker.record_failure("web_search", DOWN, lease=trial(worker, clock))
    reasons = [call[4] for call in transitions.calls]
    assert reasons == [
        "5 consecutive retryable failures",
        "cooldown of 30 s elapsed; one trial call allowed",
        "trial call failed; next cooldown 60 s",
    ]


def test_custom_cooldown_backoff_and_cap(clock: FakeClock) -> None:
    worker = WorkerBreakers(threshold=2, cooldown=10, max_cooldown=25, backoff=3, clock=clock)
    trip(worker)
    worker.record_failure("web_search", DOWN, lease=trial(worker, clock))
    assert worker.cooldown("web_search") == 25


def test_invalid_policies_are_rejected() -> None:
    with pytest.raises(ValueError):
        WorkerBreakers(cooldown=0)
    with pytest.raises(ValueError):
        WorkerBreakers(cooldown=60, max_cooldown=30)
    with pytest.raises(ValueError):
        WorkerBreakers(backoff=0.5)
