"""Benchmark: what each built-in result check costs per call, and the labelled control set's
false opens and recall per kind (scripts/testing/result_corpus.py).

Run from the repository root:

    .venv/bin/python bench/bench_result_checks.py [--repeat 15]

Each case runs `ResultChecker.check()` on one typical result with only that check on (every
other built-in check off), timeit-style: `--repeat` rounds, each timing every case once
(interleaved) for a quarter of the loop count `Timer.autorange()` picks. Reported: best and
median ns per check, and the ratio to pybreaker's `call()` of a trivial function timed in the
same rounds (the SDK hot path's baseline, bench/bench_sdk.py). The checks run on the agent's
thread, on top of the hot path that bench/bench_sdk.py bounds.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

import pybreaker

from breaker_panel import ToolBreaker
from breaker_panel.result_checks import ResultChecker, ResultChecks
from scripts.testing.result_corpus import KINDS, WEATHER_SCHEMA, evaluate

OFF: dict[str, Any] = {"empty": False, "error_body": False, "stale_after": 0}
PAGE = {
    "results": [
        {"title": f"Result {i}", "url": f"https://example.org/{i}", "snippet": "text " * 20}
        for i in range(10)
    ],
    "total": 10,
}
MCP_WEATHER = {
    "content": [{"type": "text", "text": "Oslo: 3 °C, snow"}],
    "structuredContent": {"city": "Oslo", "temperature_c": 3.0, "conditions": "snow"},
}


def only(**on: Any) -> ResultChecks:
    return ResultChecks(**{**OFF, **on})


def cases() -> dict[str, Callable[[], object]]:
    def check(checks: ResultChecks, result: Any, arguments: Any = None) -> Callable[[], object]:
        checker = ResultChecker({"t": checks})
        return lambda: checker.check("t", result, arguments)

    counter = iter(range(10**12))
    stale = ResultChecker({"t": only(stale_after=3)})
    breaker = pybreaker.CircuitBreaker(fail_max=5)

    def ok() -> int:
        return 1

    tools = [{"type": "function", "function": {"name": f"tool_{i}"}} for i in range(20)]
    run = ToolBreaker()
    questions = iter(range(10**12))

    def record_result_step() -> object:
        run.record_result("tool_3", PAGE, arguments={"q": next(questions)})
        return run.available(tools)

    return {
        "pybreaker `call()`, succeeding function": lambda: breaker.call(ok),
        "all checks off (the tool declares empty answers healthy)": check(
            ResultChecks(empty_is_healthy=True), PAGE
        ),
        "empty: a 10-result page (dict)": check(only(empty=True), PAGE),
        "empty: a short text answer": check(only(empty=True), "3 results: a, b, c"),
        "error_body: a 10-result page (dict)": check(only(error_body=True), PAGE),
        "error_body: a short text answer": check(only(error_body=True), "3 results: a, b, c"),
        "schema: MCP structuredContent, 3 fields": check(
            only(output_schema=WEATHER_SCHEMA), MCP_WEATHER
        ),
        "stale: a 10-result page, new arguments each call": lambda: stale.check(
            "t", PAGE, {"q": next(counter)}
        ),
        "custom: a callable": check(only(custom=lambda r, a: None), PAGE),
        "every built-in check (default), a 10-result page": check(ResultChecks(), PAGE, {"q": 1}),
        "run scope: record_result (every check) + available on 20 tools": record_result_step,
        "every built-in check (default), JSON text of the page": check(
            ResultChecks(), json.dumps(PAGE), {"q": 1}
        ),
    }


def measure(repeat: int) -> dict[str, list[float]]:
    timed = cases()
    loops = {name: max(1, timeit.Timer(fn).autorange()[0] // 4) for name, fn in timed.items()}
    rounds: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(repeat):
        for name, fn in timed.items():
            seconds = timeit.Timer(fn).timeit(loops[name])
            rounds[name].append(seconds / loops[name] * 1e9)
    return rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed rounds per case")
    args = parser.parse_args()
    print(f"Python {platform.python_version()} on {platform.machine()}, {args.repeat} rounds")
    rounds = measure(args.repeat)
    base = rounds["pybreaker `call()`, succeeding function"]
    print("| case | best ns | median ns | ratio to pybreaker `call()` |")
    print("|---|---|---|---|")
    for name, values in rounds.items():
        ratio = statistics.median(v / b for v, b in zip(values, base, strict=True))
        print(f"| {name} | {min(values):.0f} | {statistics.median(values):.0f} | {ratio:.2f} |")
    result = evaluate()
    print()
    print(
        f"Control set: {result.healthy} healthy results, {result.false_degraded} called degraded,"
    )
    print(f"false opens: {result.false_opens}")
    for kind in KINDS:
        print(f"recall {kind}: {result.recall[kind]:.2f} of {result.counted[kind]} failures")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
