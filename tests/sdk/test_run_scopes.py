"""RunBreakers: one run's view of run, worker and wider (fleet) scopes."""

from __future__ import annotations

import pytest

from breaker_panel import (
    RunBreakers,
    Scope,
    State,
    StepBudgetWarning,
    ToolBreaker,
    ToolFailure,
    WorkerBreakers,
)
from breaker_panel.external_scope import ExternalScope, ScopeState
from breaker_panel.notice import Removal
from breaker_panel.toolsets import tool_name
from tests.sdk.support import FakeClock, TransitionLog, chat_tools

TOOLS = chat_tools("web_search", "fetch_url", "calculator")
DOWN = ToolFailure("503 from vendor", retryable=True, attempts=5)
BAD_ARGS = ToolFailure("400 bad query", retryable=False)


@pytest.fixture
def worker(clock: FakeClock, transitions: TransitionLog) -> WorkerBreakers:
    return WorkerBreakers(clock=clock, on_transition=transitions)


def offered(run: RunBreakers) -> list[str | None]:
    return [tool_name(tool) for tool in run.available(TOOLS)]


def fail(run: RunBreakers, times: int, name: str = "web_search") -> None:
    for _ in range(times):
        run.record_failure(name, DOWN)


def open_in_worker(worker: WorkerBreakers) -> None:
    fail(worker.start_run(), worker.policy.threshold)


def test_a_run_without_a_worker_behaves_like_its_tool_breaker() -> None:
    run = RunBreakers()
    fail(run, 5)
    assert offered(run) == ["fetch_url", "calculator"]
    assert run.removals()["web_search"].scope is Scope.RUN
    assert run.notice() is not None


def test_the_run_breaker_trips_first_in_a_worker(worker: WorkerBreakers) -> None:
    run = worker.start_run(threshold=3)
    fail(run, 3)
    assert offered(run) == ["fetch_url", "calculator"]
    assert run.removals()["web_search"].scope is Scope.RUN


def test_failures_across_runs_open_the_worker_for_every_run(worker: WorkerBreakers) -> None:
    first, second, third = worker.start_run(), worker.start_run(), worker.start_run()
    fail(first, 3)
    fail(second, 2)
    assert worker.is_open("web_search")
    for run in (first, second, third):
        assert offered(run) == ["fetch_url", "calculator"]
        assert run.removals()["web_search"].scope is Scope.WORKER


def test_a_run_names_the_workers_last_error_without_scope_words(worker: WorkerBreakers) -> None:
    open_in_worker(worker)
    run = worker.start_run()
    run.available(TOOLS)  # a run hears of another scope's tools only among those it offers
    text = run.notice() or ""
    assert "- web_search: it keeps failing (last error: 503 from vendor)" in text
    assert "scope" not in text and "worker" not in text


def test_a_removed_tool_stays_removed_after_the_worker_closes(
    worker: WorkerBreakers, clock: FakeClock
) -> None:
    open_in_worker(worker)
    early = worker.start_run()
    assert "web_search" not in offered(early)
    clock.advance(30)
    prober = worker.start_run()
    assert "web_search" in offered(prober)
    prober.record_success("web_search")
    assert worker.state("web_search") is State.CLOSED
    assert "web_search" not in offered(early)
    assert "web_search" in offered(worker.start_run())


def test_only_the_first_run_to_ask_gets_the_trial(worker: WorkerBreakers, clock: FakeClock) -> None:
    open_in_worker(worker)
    clock.advance(30)
    first, second = worker.start_run(), worker.start_run()
    assert "web_search" in offered(first)
    assert "web_search" not in offered(second)
    assert "web_search" in offered(first)  # still its trial on the next step


def test_a_failed_trial_removes_the_tool_from_the_prober(
    worker: WorkerBreakers, clock: FakeClock
) -> None:
    open_in_worker(worker)
    clock.advance(30)
    prober = worker.start_run()
    assert "web_search" in offered(prober)
    prober.record_failure("web_search", DOWN)
    assert worker.state("web_search") is State.OPEN
    assert worker.cooldown("web_search") == 60
    assert "web_search" not in offered(prober)
    assert prober.removals()["web_search"].scope is Scope.WORKER


def test_a_semantic_trial_result_keeps_the_trial(worker: WorkerBreakers, clock: FakeClock) -> None:
    open_in_worker(worker)
    clock.advance(30)
    prober = worker.start_run()
    assert "web_search" in offered(prober)
    prober.record_failure("web_search", BAD_ARGS)
    assert worker.state("web_search") is State.HALF_OPEN
    assert "web_search" in offered(prober)


def test_closing_a_run_hands_its_unused_trial_on(worker: WorkerBreakers, clock: FakeClock) -> None:
    open_in_worker(worker)
    clock.advance(30)
    prober = worker.start_run()
    assert "web_search" in offered(prober)
    prober.close()
    assert "web_search" in offered(worker.start_run())


def test_an_unused_trial_expires_and_the_holder_loses_the_tool(
    worker: WorkerBreakers, clock: FakeClock
) -> None:
    open_in_worker(worker)
    clock.advance(30)
    idle, other = worker.start_run(), worker.start_run()
    assert "web_search" in offered(idle)
    clock.advance(worker.trial_lease)
    assert "web_search" in offered(other)
    assert "web_search" not in offered(idle)


def test_is_open_claims_the_trial_like_available(worker: WorkerBreakers, clock: FakeClock) -> None:
    open_in_worker(worker)
    clock.advance(30)
    first, second = worker.start_run(), worker.start_run()
    assert first.is_open("web_search") is False
    assert second.is_open("web_search") is True
    assert second.open_tools() == ("web_search",)


def test_semantic_failures_are_counted_per_run_only(worker: WorkerBreakers) -> None:
    run = worker.start_run()
    for _ in range(3):
        run.record_failure("web_search", BAD_ARGS)
    assert worker.consecutive("web_search") == 0
    assert "web_search: 3 calls got no usable answer" in (run.notice() or "")
    assert "no usable answer" not in (worker.start_run().notice() or "")


def test_on_remove_is_told_once_per_tool(worker: WorkerBreakers) -> None:
    seen: list[Removal] = []
    run = worker.start_run(on_remove=seen.append)
    fail(run, 5)
    for _ in range(3):
        run.available(TOOLS)
    assert [(r.tool, r.scope) for r in seen] == [("web_search", Scope.RUN)]


def test_the_removal_time_is_when_the_run_lost_the_tool(
    worker: WorkerBreakers, clock: FakeClock
) -> None:
    open_in_worker(worker)
    clock.advance(7)
    run = worker.start_run()
    run.available(TOOLS)
    assert run.removals()["web_search"].since == clock.now


def test_start_run_passes_threshold_step_budget_and_transitions(
    worker: WorkerBreakers,
) -> None:
    log = TransitionLog()
    with pytest.warns(StepBudgetWarning):
        run = worker.start_run(threshold=4, step_budget=10, on_transition=log)
    fail(run, 4)
    assert log.moves() == [("web_search", "run", "closed", "open")]


def test_run_and_worker_transitions_are_reported_separately(
    clock: FakeClock, transitions: TransitionLog
) -> None:
    worker = WorkerBreakers(clock=clock, on_transition=transitions)
    run = worker.start_run(on_transition=transitions)
    fail(run, 5)
    assert sorted(transitions.moves()) == [
        ("web_search", "run", "closed", "open"),
        ("web_search", "worker", "closed", "open"),
    ]


def test_the_run_scope_is_named_when_run_and_worker_open_together(
    worker: WorkerBreakers,
) -> None:
    run = worker.start_run()
    fail(run, 5)
    assert run.removals()["web_search"].scope is Scope.RUN


def test_an_explicit_tool_breaker_can_be_wrapped(clock: FakeClock) -> None:
    breaker = ToolBreaker(threshold=2, clock=clock)
    run = RunBreakers(breaker, clock=clock)
    fail(run, 2)
    assert breaker.is_open("web_search")
    assert run.is_open("web_search")


# -- a wider scope: the fleet, as the ControlPlane client will feed it -------------------------


@pytest.fixture
def fleet() -> ExternalScope:
    return ExternalScope(Scope.FLEET)


def test_a_fleet_open_tool_is_removed_with_fleet_scope(
    worker: WorkerBreakers, fleet: ExternalScope
) -> None:
    run = worker.start_run(sources=[fleet])
    assert offered(run) == ["web_search", "fetch_url", "calculator"]
    fleet.update({"web_search": ScopeState(State.OPEN, "5 failures from 2 workers", "503")})
    assert offered(run) == ["fetch_url", "calculator"]
    # The fleet's own reason and error are other agents' business, not this run's.
    assert "- web_search: failing for other agents right now" in (run.notice() or "")


@pytest.mark.parametrize("state", [State.OPEN, State.HALF_OPEN, State.FORCED_OPEN])
def test_fleet_states_that_remove_a_tool(
    worker: WorkerBreakers, fleet: ExternalScope, state: State
) -> None:
    fleet.update({"web_search": ScopeState(state, "operator: vendor contract ended")})
    assert "web_search" not in offered(worker.start_run(sources=[fleet]))


@pytest.mark.parametrize("state", [State.CLOSED, State.FORCED_CLOSED])
def test_fleet_states_that_keep_a_tool(
    worker: WorkerBreakers, fleet: ExternalScope, state: State
) -> None:
    fleet.update({"web_search": ScopeState(state)})
    assert "web_search" in offered(worker.start_run(sources=[fleet]))


def test_a_fleet_removal_stays_after_the_fleet_closes(
    worker: WorkerBreakers, fleet: ExternalScope
) -> None:
    run = worker.start_run(sources=[fleet])
    fleet.update({"web_search": ScopeState(State.FORCED_OPEN, "kill switch")})
    run.available(TOOLS)
    fleet.update({})
    assert "web_search" not in offered(run)
    assert "web_search" in offered(worker.start_run(sources=[fleet]))


def test_a_forced_open_reason_reaches_the_notice(
    worker: WorkerBreakers, fleet: ExternalScope
) -> None:
    fleet.update({"web_search": ScopeState(State.FORCED_OPEN, "forced open: contract ended")})
    run = worker.start_run(sources=[fleet])
    run.available(TOOLS)
    text = run.notice() or ""
    assert "- web_search: switched off by an operator (contract ended)" in text


def test_fleet_forced_closed_keeps_run_and_worker_breakers_from_removing(
    worker: WorkerBreakers, fleet: ExternalScope
) -> None:
    fleet.update({"web_search": ScopeState(State.FORCED_CLOSED, "operator keeps it")})
    run = worker.start_run(sources=[fleet])
    fail(run, 5)
    assert worker.is_open("web_search")
    assert "web_search" in offered(run)
    assert "web_search" in offered(worker.start_run(sources=[fleet]))


def test_forced_closed_does_not_give_back_a_tool_already_removed(
    worker: WorkerBreakers, fleet: ExternalScope
) -> None:
    run = worker.start_run(sources=[fleet])
    fail(run, 5)
    assert "web_search" not in offered(run)
    fleet.update({"web_search": ScopeState(State.FORCED_CLOSED, "operator keeps it")})
    assert "web_search" not in offered(run)


def test_a_source_is_any_object_with_scope_and_snapshot(worker: WorkerBreakers) -> None:
    class Fleet:
        scope = Scope.FLEET

        def snapshot(self) -> dict[str, ScopeState]:
            return {"calculator": ScopeState(State.OPEN, "down")}

    assert offered(worker.start_run(sources=[Fleet()])) == ["web_search", "fetch_url"]


# -- the last error a fleet removal names ------------------------------------------------------


def test_a_fleet_removal_names_the_runs_own_last_error(
    worker: WorkerBreakers, fleet: ExternalScope
) -> None:
    run = worker.start_run(sources=[fleet])
    run.record_failure("web_search", ToolFailure("503 from vendor"))
    fleet.update({"web_search": ScopeState(State.OPEN, "5 failures from 2 workers", "timeout")})
    run.available(TOOLS)
    assert "- web_search: it keeps failing (last error: 503 from vendor)" in (run.notice() or "")


def test_a_fleet_removal_falls_back_to_the_workers_error_never_the_fleets(
    worker: WorkerBreakers, fleet: ExternalScope
) -> None:
    worker.start_run().record_failure("web_search", ToolFailure("502 bad gateway"))
    fleet.update(
        {
            "web_search": ScopeState(State.OPEN, "5 failures from 2 workers", "timeout"),
            "fetch_url": ScopeState(State.OPEN, "5 failures from 2 workers", "DNS failure"),
        }
    )
    run = worker.start_run(sources=[fleet])
    run.available(TOOLS)
    text = run.notice() or ""
    assert "- web_search: it keeps failing (last error: 502 bad gateway)" in text
    assert "- fetch_url: failing for other agents right now" in text
    assert "DNS failure" not in text


def test_a_semantic_rejection_is_not_named_as_the_last_error(
    worker: WorkerBreakers, fleet: ExternalScope
) -> None:
    run = worker.start_run(sources=[fleet])
    run.record_failure("web_search", BAD_ARGS)
    fleet.update({"web_search": ScopeState(State.OPEN, "5 failures from 2 workers")})
    run.available(TOOLS)
    assert "- web_search: failing for other agents right now" in (run.notice() or "")


def test_a_forced_open_keeps_the_operators_reason_over_the_runs_error(
    worker: WorkerBreakers, fleet: ExternalScope
) -> None:
    run = worker.start_run(sources=[fleet])
    run.record_failure("web_search", DOWN)
    fleet.update({"web_search": ScopeState(State.FORCED_OPEN, "forced open: contract ended")})
    run.available(TOOLS)
    assert "- web_search: switched off by an operator (contract ended)" in (run.notice() or "")
