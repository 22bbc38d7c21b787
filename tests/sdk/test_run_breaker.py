"""ToolBreaker: the run-scope rules."""

from __future__ import annotations

import threading

import pytest

from breaker_panel import Outcome, Scope, State, ToolBreaker, ToolFailure
from tests.sdk.support import FakeClock, TransitionLog

DOWN = ToolFailure("503 from vendor", retryable=True, attempts=5)
BAD_ARGS = ToolFailure("400 unknown field 'sku'", retryable=False)


def fail(breaker: ToolBreaker, name: str, times: int) -> None:
    for _ in range(times):
        breaker.record_failure(name, DOWN)


def test_threshold_defaults_to_five() -> None:
    assert ToolBreaker.THRESHOLD == 5
    assert ToolBreaker().threshold == 5


def test_threshold_is_configurable() -> None:
    breaker = ToolBreaker(threshold=3)
    fail(breaker, "web_search", 3)
    assert breaker.is_open("web_search")


def test_subclass_can_change_the_class_threshold() -> None:
    class Strict(ToolBreaker):
        THRESHOLD = 2

    breaker = Strict()
    fail(breaker, "web_search", 2)
    assert breaker.is_open("web_search")


def test_threshold_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="threshold"):
        ToolBreaker(threshold=0)


def test_four_consecutive_failures_keep_it_closed() -> None:
    breaker = ToolBreaker()
    fail(breaker, "web_search", 4)
    assert not breaker.is_open("web_search")
    assert breaker.consecutive("web_search") == 4
    assert breaker.state("web_search") is State.CLOSED


def test_five_consecutive_failures_open_it() -> None:
    breaker = ToolBreaker()
    fail(breaker, "web_search", 5)
    assert breaker.is_open("web_search")
    assert breaker.state("web_search") is State.OPEN
    assert breaker.open_tools() == ("web_search",)


def test_one_exhausted_call_is_one_failure_whatever_its_attempts() -> None:
    breaker = ToolBreaker()
    breaker.record_failure("web_search", ToolFailure("503", retryable=True, attempts=50))
    assert breaker.consecutive("web_search") == 1
    assert not breaker.is_open("web_search")


def test_a_success_resets_the_count() -> None:
    breaker = ToolBreaker()
    fail(breaker, "web_search", 4)
    breaker.record_success("web_search")
    fail(breaker, "web_search", 4)
    assert not breaker.is_open("web_search")
    assert breaker.consecutive("web_search") == 4


def test_a_semantic_failure_neither_counts_nor_resets() -> None:
    breaker = ToolBreaker()
    fail(breaker, "web_search", 4)
    breaker.record_failure("web_search", BAD_ARGS)
    assert breaker.consecutive("web_search") == 4
    fail(breaker, "web_search", 1)
    assert breaker.is_open("web_search")


def test_semantic_failures_never_open_the_breaker() -> None:
    breaker = ToolBreaker()
    for _ in range(50):
        breaker.record_failure("lookup", BAD_ARGS)
    assert not breaker.is_open("lookup")
    assert breaker.available([{"name": "lookup"}]) == [{"name": "lookup"}]


def test_counts_are_per_tool() -> None:
    breaker = ToolBreaker()
    for _ in range(4):
        breaker.record_failure("web_search", DOWN)
        breaker.record_failure("fetch_url", DOWN)
    breaker.record_success("fetch_url")
    fail(breaker, "web_search", 1)
    assert breaker.open_tools() == ("web_search",)


def test_an_open_tool_stays_open_for_the_rest_of_the_run() -> None:
    breaker = ToolBreaker()
    fail(breaker, "web_search", 5)
    for _ in range(10):
        breaker.record_success("web_search")
    assert breaker.is_open("web_search")


def test_a_plain_exception_counts_as_retryable() -> None:
    breaker = ToolBreaker()
    for _ in range(5):
        info = breaker.record_failure("web_search", ConnectionError("reset"))
        assert info.outcome is Outcome.RETRYABLE
    assert breaker.is_open("web_search")
    assert breaker.removals()["web_search"].last_error == "ConnectionError: reset"


def test_record_failure_without_an_exception_does_not_crash() -> None:
    breaker = ToolBreaker()
    breaker.record_failure("web_search")
    breaker.record_failure("web_search", "timeout after 30 s")
    assert breaker.consecutive("web_search") == 2


def test_record_failure_returns_the_classification() -> None:
    info = ToolBreaker().record_failure("lookup", BAD_ARGS)
    assert info.outcome is Outcome.SEMANTIC
    assert info.error == "ToolFailure: 400 unknown field 'sku'"


def test_the_removal_keeps_scope_reason_last_error_and_time(clock: FakeClock) -> None:
    breaker = ToolBreaker(clock=clock)
    fail(breaker, "web_search", 4)
    clock.advance(12)
    breaker.record_failure("web_search", ToolFailure("502 bad gateway", attempts=5))
    removal = breaker.removals()["web_search"]
    assert removal.scope is Scope.RUN
    assert removal.reason == "5 consecutive retryable failures"
    assert removal.last_error == "ToolFailure: 502 bad gateway"
    assert removal.since == clock.now


def test_the_transition_to_open_is_reported_once(transitions: TransitionLog) -> None:
    breaker = ToolBreaker(on_transition=transitions)
    fail(breaker, "web_search", 8)
    assert transitions.moves() == [("web_search", "run", "closed", "open")]
    assert transitions.calls[0][4] == "5 consecutive retryable failures"


def test_a_transition_callback_may_read_the_breaker() -> None:
    seen: list[bool] = []
    breaker: ToolBreaker

    def callback(tool: str, scope: Scope, old: State, new: State, reason: str) -> None:
        seen.append(breaker.is_open(tool))

    breaker = ToolBreaker(threshold=1, on_transition=callback)
    breaker.record_failure("web_search", DOWN)
    assert seen == [True]


def test_semantic_cap_is_three_and_never_removes_the_tool() -> None:
    breaker = ToolBreaker()
    for _ in range(2):
        breaker.record_failure("lookup", BAD_ARGS)
    assert breaker.semantic_strikes() == []
    breaker.record_failure("lookup", BAD_ARGS)
    [strike] = breaker.semantic_strikes()
    assert (strike.tool, strike.count) == ("lookup", 3)
    assert not breaker.is_open("lookup")


def test_semantic_count_goes_on_past_the_cap() -> None:
    breaker = ToolBreaker()
    for _ in range(9):
        breaker.record_failure("lookup", BAD_ARGS)
    assert breaker.semantic_strikes()[0].count == 9
    assert "lookup: 9 calls got no usable answer" in (breaker.notice() or "")


def test_a_success_clears_the_semantic_count() -> None:
    breaker = ToolBreaker()
    for _ in range(3):
        breaker.record_failure("lookup", BAD_ARGS)
    breaker.record_success("lookup")
    assert breaker.semantic_strikes() == []
    assert breaker.notice() is None


def test_retryable_failures_do_not_clear_the_semantic_count() -> None:
    breaker = ToolBreaker()
    for _ in range(3):
        breaker.record_failure("lookup", BAD_ARGS)
    breaker.record_failure("lookup", DOWN)
    assert [s.tool for s in breaker.semantic_strikes()] == ["lookup"]


def test_semantic_cap_is_configurable() -> None:
    breaker = ToolBreaker(semantic_cap=1)
    breaker.record_failure("lookup", BAD_ARGS)
    assert [s.tool for s in breaker.semantic_strikes()] == ["lookup"]


def test_semantic_cap_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="semantic_cap"):
        ToolBreaker(semantic_cap=0)


def test_available_filters_the_open_tool() -> None:
    breaker = ToolBreaker()
    tools = [{"name": "web_search"}, {"name": "calculator"}]
    fail(breaker, "web_search", 5)
    assert breaker.available(tools) == [{"name": "calculator"}]
    assert tools == [{"name": "web_search"}, {"name": "calculator"}]


def test_parallel_failures_from_threads_are_all_counted() -> None:
    breaker = ToolBreaker(threshold=10**9)
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        for _ in range(2000):
            breaker.record_failure("web_search", DOWN)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert breaker.consecutive("web_search") == 16000
