"""Under contention, exactly one caller across all threads gets the half-open trial."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from breaker_panel import RunBreakers, ToolFailure, WorkerBreakers
from breaker_panel.toolsets import tool_name
from breaker_panel.worker import TrialLease
from tests.sdk.support import FakeClock, TransitionLog, chat_tools

THREADS = 16
ROUNDS = 25
DOWN = ToolFailure("503 from vendor", retryable=True)


@pytest.fixture(autouse=True)
def frequent_thread_switches() -> Iterator[None]:
    # Switch threads far more often than the default 5 ms, so races get a chance to show.
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def race[R](action: Callable[[int], R]) -> list[R]:
    """Run `action(i)` on THREADS threads released together by a barrier."""
    barrier = threading.Barrier(THREADS)
    results: list[Any] = [None] * THREADS

    def body(index: int) -> None:
        barrier.wait()
        results[index] = action(index)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_exactly_one_thread_gets_the_trial_lease(clock: FakeClock) -> None:
    worker = WorkerBreakers(threshold=1, clock=clock)
    worker.record_failure("web_search", DOWN)
    for _ in range(ROUNDS):
        clock.advance(worker.cooldown("web_search"))
        leases = [lease for lease in race(lambda _: worker.acquire_trial("web_search")) if lease]
        assert len(leases) == 1
        worker.record_failure("web_search", DOWN, lease=leases[0])  # re-open for the next round


def offered_to(runs: list[RunBreakers], tools: list[Any]) -> Callable[[int], list[str | None]]:
    return lambda index: [tool_name(tool) for tool in runs[index].available(tools)]


def test_exactly_one_run_is_offered_the_tool_on_trial(clock: FakeClock) -> None:
    worker = WorkerBreakers(threshold=1, clock=clock)
    worker.record_failure("web_search", DOWN)
    tools = chat_tools("web_search", "fetch_url")
    for _ in range(ROUNDS):
        clock.advance(worker.cooldown("web_search"))
        runs = [worker.start_run() for _ in range(THREADS)]
        offers = race(offered_to(runs, tools))
        probers = [run for run, names in zip(runs, offers, strict=True) if "web_search" in names]
        assert len(probers) == 1
        probers[0].record_failure("web_search", DOWN)


def test_only_the_trial_holder_closes_it_while_others_report_late_results(
    clock: FakeClock, transitions: TransitionLog
) -> None:
    worker = WorkerBreakers(threshold=1, clock=clock, on_transition=transitions)
    worker.record_failure("web_search", DOWN)
    clock.advance(30)
    lease = worker.acquire_trial("web_search")
    assert lease is not None

    def report(index: int) -> None:
        if index == 0:
            worker.record_success("web_search", lease=lease)
        else:
            worker.record_failure("web_search", DOWN)  # calls from before the trip

    race(report)
    # Late failures decide nothing while half-open; once the holder has closed it they count
    # again, and the first of them re-opens it (threshold 1). Nothing else can happen.
    moves = [move[2:] for move in transitions.moves()]
    assert moves[:3] == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]
    assert moves[3:] in ([], [("closed", "open")])
    assert not worker.holds_trial(lease)


def test_transitions_reach_the_callback_in_the_order_they_happened(clock: FakeClock) -> None:
    # Thread A's callback is still busy with closed -> open when the main thread makes the next
    # change (open -> half_open): that one must wait for A's, not overtake it.
    told: list[tuple[str, str]] = []
    busy, go = threading.Event(), threading.Event()

    def on_transition(tool: str, scope: object, old: object, new: object, reason: str) -> None:
        if (str(old), str(new)) == ("closed", "open"):
            busy.set()
            assert go.wait(10)
        told.append((str(old), str(new)))

    worker = WorkerBreakers(threshold=1, clock=clock, on_transition=on_transition)
    opener = threading.Thread(target=worker.record_failure, args=("web_search", DOWN))
    opener.start()
    assert busy.wait(10)
    clock.advance(30)
    assert worker.acquire_trial("web_search") is not None  # returns: A will tell its change
    go.set()
    opener.join(10)
    assert told == [("closed", "open"), ("open", "half_open")]


def test_counting_from_many_threads_loses_no_failure(clock: FakeClock) -> None:
    worker = WorkerBreakers(threshold=10**9, clock=clock)
    race(lambda _: [worker.record_failure("web_search", DOWN) for _ in range(1000)])
    assert worker.consecutive("web_search") == THREADS * 1000


def test_each_lease_is_unique(clock: FakeClock) -> None:
    worker = WorkerBreakers(threshold=1, clock=clock)
    seen: set[TrialLease] = set()
    for _ in range(ROUNDS):
        worker.record_failure("web_search", DOWN)
        clock.advance(worker.cooldown("web_search"))
        [lease] = [x for x in race(lambda _: worker.acquire_trial("web_search")) if x]
        assert lease not in seen
        seen.add(lease)
        worker.record_success("web_search", lease=lease)


def test_a_run_view_shared_by_threads_reports_each_removal_once(clock: FakeClock) -> None:
    worker = WorkerBreakers(threshold=1, clock=clock)
    removed: list[str] = []
    run = RunBreakers(worker=worker, clock=clock, on_remove=lambda r: removed.append(r.tool))
    worker.record_failure("web_search", DOWN)
    race(lambda _: run.available(chat_tools("web_search")))
    assert removed == ["web_search"]
