"""Benchmark: the SDK's per-call hot path against pybreaker's `CircuitBreaker.call()`.

Run from the repository root:

    .venv/bin/python bench/bench_sdk.py [--repeat 25]

Every case runs in the same process and run, timeit-style: `--repeat` rounds, each timing
every case once (interleaved) for a quarter of the loop count `Timer.autorange()` picks
(so about 0.05 s per case and round).
Reported: best and median ns per operation, and the ratio to pybreaker's `call()` as the median
of per-round ratios, which a shared, loaded machine disturbs far less than raw times. Success
steps are compared with `call()` of a trivial function; the failure step (raise a ToolFailure,
catch it, record it, filter) with `call()` of a function that raises, caught, like for like.
The goal: our full per-call work (one `record_*` plus `available()` on a 20-tool OpenAI Chat
array) costs no more than pybreaker's `call()` alone.

While a case is timed, a `sys.addaudithook` hook is armed that rejects any file open, socket,
subprocess or other I/O audit event, so a hot path that touched the disk or the network would
fail the run instead of producing a figure.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import socket
import statistics
import sys
import timeit
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

import pybreaker

from breaker_panel import (
    ControlPlane,
    PlaneConfig,
    RunBreakers,
    State,
    ToolBreaker,
    ToolFailure,
    WorkerBreakers,
)
from breaker_panel.client import Run
from breaker_panel.external_scope import ExternalScope, ScopeState

IO_EVENT_PREFIXES = (
    "open",
    "os.",
    "socket.",
    "subprocess.",
    "shutil.",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
    "ctypes.",
    "webbrowser.",
)


class IOGuard:
    """An audit hook that, while armed, records and rejects every I/O event."""

    def __init__(self) -> None:
        self.armed = False
        self.seen: list[str] = []
        sys.addaudithook(self._hook)  # audit hooks cannot be removed: disarm instead

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.armed and event.startswith(IO_EVENT_PREFIXES):
            self.seen.append(f"{event}{args!r}")
            raise RuntimeError(f"I/O on the hot path: {event}")

    def prove_live(self) -> None:
        """Show that the guard really rejects I/O, so that zero events below means something."""
        for attempt in (lambda: open(os.devnull), lambda: socket.socket()):  # noqa: SIM115
            try:
                with self.armed_section():
                    attempt().close()
            except RuntimeError:
                continue
            raise AssertionError("the I/O guard let an open/socket call through")
        self.seen.clear()

    @contextmanager
    def armed_section(self) -> Iterator[None]:
        self.armed = True
        try:
            yield
        finally:
            self.armed = False


def chat_tools(count: int) -> list[dict[str, Any]]:
    names = ["web_search", *(f"tool_{i:02}" for i in range(1, count))]
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"{name} does one thing.",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
        }
        for name in names
    ]


TOOLS = chat_tools(20)
NAMES = [tool["function"]["name"] for tool in TOOLS]
DOWN = ToolFailure("503 from vendor", retryable=True, attempts=5)
PYBREAKER_OK = "pybreaker call(), succeeding function"
PYBREAKER_FAIL = "pybreaker call(), failing function (caught)"


def trivial() -> int:
    return 1


def failing() -> int:
    raise ConnectionError("503 from vendor")


def tripped_breaker() -> ToolBreaker:
    """A run breaker with web_search (1 of the 20 tools) removed."""
    breaker = ToolBreaker()
    for _ in range(breaker.threshold):
        breaker.record_failure("web_search", DOWN)
    return breaker


@dataclass(frozen=True)
class Case:
    name: str
    func: Callable[[], object]
    baseline: str  # the pybreaker case its ratio is taken against
    full: bool = False  # a whole step of per-call work: record_* plus available()
    reset: Callable[[], object] | None = None  # run before each round, untimed


def pybreaker_cases() -> list[Case]:
    ok = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)
    never_opens = pybreaker.CircuitBreaker(fail_max=10**12, reset_timeout=30)

    def call_failing() -> None:
        with contextlib.suppress(ConnectionError):
            never_opens.call(failing)

    return [
        Case("bare call of the function", trivial, PYBREAKER_OK),
        Case(PYBREAKER_OK, lambda: ok.call(trivial), PYBREAKER_OK),
        Case(PYBREAKER_FAIL, call_failing, PYBREAKER_FAIL),
    ]


def sdk_cases() -> list[Case]:
    clean, tripped = ToolBreaker(), tripped_breaker()
    counting = ToolBreaker(threshold=10**12)  # never opens, so every failure is counted
    worker = WorkerBreakers()
    for _ in range(worker.policy.threshold):
        worker.record_failure("web_search", DOWN)
    run = worker.start_run()
    run.available(TOOLS)  # web_search is now removed in this run, by the worker scope
    # What a ControlPlane run sees: the fleet knows all 20 tools, all closed.
    fleet = ExternalScope()
    fleet.update({tool["function"]["name"]: ScopeState(State.CLOSED) for tool in TOOLS})
    fleet_run = worker.start_run(sources=[fleet])
    fleet_run.available(TOOLS)
    # The fleet also holds open a tool this run does not offer: the run must not hear of it, so
    # each step checks the names it offers against it.
    other_fleet = ExternalScope()
    other_fleet.update({**fleet.snapshot(), "not_offered": ScopeState(State.OPEN, "down")})
    other_run = worker.start_run(sources=[other_fleet])
    assert len(other_run.available(TOOLS)) == 19 and "not_offered" not in other_run.removals()
    # The one run of this worker holding the fleet's half-open trial lease of tool_05.
    trial = ScopeState(State.HALF_OPEN, "cooldown elapsed", trial="lease", since="t1")
    trial_fleet = ExternalScope()
    trial_fleet.update({**fleet.snapshot(), "tool_05": trial})
    trial_fleet.grant_trial("tool_05", trial, window=1, expires_at=float("inf"))
    trial_run = worker.start_run(sources=[trial_fleet])
    assert len(trial_run.available(TOOLS)) == 19 and trial_run.fleet_trials() == ("tool_05",)

    # What an agent really runs: a ControlPlane run, which also buffers each call's event. No
    # server and no sender thread (as while the sender backs off); the buffer is emptied
    # between rounds, untimed, so every timed call takes the append path, never the drop path.
    plane = ControlPlane(
        "http://127.0.0.1:9",
        token="bench",
        worker_id="bench",
        config=PlaneConfig(max_buffer=10**9),
        start=False,
    )
    plane.update_fleet({"version": 1, "tools": {name: {"state": "closed"} for name in NAMES}})
    tripping = plane.start_run(agent="bench")
    for _ in range(plane.threshold):
        tripping.record_failure("web_search", DOWN)  # the worker removes it, as in the views above
    plane_run = plane.start_run(agent="bench")
    assert len(plane_run.available(TOOLS)) == 19

    def step(breaker: ToolBreaker | RunBreakers | Run) -> Callable[[], None]:
        def one_step() -> None:
            breaker.record_success("tool_03")
            breaker.available(TOOLS)

        return one_step

    def failed_step() -> None:
        # Like for like with pybreaker's failing call: raise, catch, record, then filter.
        try:
            raise ToolFailure("503 from vendor", retryable=True, attempts=5)
        except ToolFailure as failure:
            counting.record_failure("tool_03", failure)
        tripped.available(TOOLS)

    return [
        Case("record_success + available, none removed", step(clean), PYBREAKER_OK, True),
        Case("record_success + available, 1 of 20 removed", step(tripped), PYBREAKER_OK, True),
        Case("run+worker view: success + available, 1 removed", step(run), PYBREAKER_OK, True),
        Case("run+worker+fleet view, same", step(fleet_run), PYBREAKER_OK, True),
        Case("run+worker+fleet view, holding a fleet trial", step(trial_run), PYBREAKER_OK),
        Case(
            "ControlPlane run: success + available + event, 1 removed",
            step(plane_run),
            PYBREAKER_OK,
            True,
            reset=plane.sender.buffer.clear,
        ),
        Case("run+worker+fleet view, a fleet tool not offered", step(other_run), PYBREAKER_OK),
        Case("raise + record_failure + available, 1 removed", failed_step, PYBREAKER_FAIL, True),
        Case("record_success alone", lambda: tripped.record_success("tool_03"), PYBREAKER_OK),
        Case(
            "record_failure alone (retryable, counted)",
            lambda: counting.record_failure("tool_03", DOWN),
            PYBREAKER_OK,
        ),
        Case("available alone, none removed", lambda: clean.available(TOOLS), PYBREAKER_OK),
        Case("available alone, 1 of 20 removed", lambda: tripped.available(TOOLS), PYBREAKER_OK),
    ]


@dataclass
class Timings:
    case: Case
    loops: int
    per_op_ns: list[float]


def measure(cases: list[Case], rounds: int, guard: IOGuard) -> dict[str, Timings]:
    """Interleaved: every round times every case once, so a load change on a shared machine
    hits a case and its baseline alike and the per-round ratios stay comparable."""
    timers = {case.name: timeit.Timer(case.func) for case in cases}
    # autorange() sizes a round to >= 0.2 s; a quarter of that keeps rounds short, so a case
    # and its baseline are timed close together and share the machine's load of the moment.
    timings = {
        case.name: Timings(case, max(timers[case.name].autorange()[0] // 4, 5_000), [])
        for case in cases
    }
    for _ in range(rounds):
        for name, timing in timings.items():
            if timing.case.reset is not None:
                timing.case.reset()
            with guard.armed_section():
                seconds = timers[name].timeit(timing.loops)
            timing.per_op_ns.append(seconds / timing.loops * 1e9)
    return timings


def paired_ratio(timing: Timings, baseline: Timings) -> float:
    """The median over rounds of this case's time over its baseline's in the same round."""
    return statistics.median(
        ours / theirs for ours, theirs in zip(timing.per_op_ns, baseline.per_op_ns, strict=True)
    )


def report(timings: dict[str, Timings], guard: IOGuard) -> bool:
    print(f"{'case':50} {'best ns/op':>10} {'median':>8} {'ratio':>6}  vs")
    for name, timing in timings.items():
        ratio = paired_ratio(timing, timings[timing.case.baseline])
        best, median = min(timing.per_op_ns), statistics.median(timing.per_op_ns)
        against = "ok" if timing.case.baseline == PYBREAKER_OK else "fail"
        print(f"{name:50} {best:10.0f} {median:8.0f} {ratio:6.2f}  {against}")
    full = [t for t in timings.values() if t.case.full]
    worst = max(full, key=lambda t: paired_ratio(t, timings[t.case.baseline]))
    worst_ratio = paired_ratio(worst, timings[worst.case.baseline])
    verdict = "met" if worst_ratio <= 1 else "NOT met"
    print(
        f"\nratio = median over rounds of (case / pybreaker call() in the same round); "
        f"'ok' = against a succeeding call, 'fail' = against a failing one."
        f"\ngoal (record + available <= pybreaker call()): {verdict}; "
        f"worst full step {worst_ratio:.2f}x ({worst.case.name})"
    )
    print(
        f"I/O audit events during timed sections: {len(guard.seen)} "
        "(the guard was first shown to reject open() and socket())"
    )
    return not guard.seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=25, help="timed rounds per case")
    args = parser.parse_args()
    print(
        f"Python {platform.python_version()} on {platform.machine()} ({platform.system()}), "
        f"pybreaker {version('pybreaker')}, {args.repeat} interleaved rounds\n"
    )
    guard = IOGuard()
    guard.prove_live()
    timings = measure(pybreaker_cases() + sdk_cases(), args.repeat, guard)
    return 0 if report(timings, guard) else 1


if __name__ == "__main__":
    raise SystemExit(main())
