"""Benchmark: what pricing a model call from the genai-prices table costs at ingest, as a ratio
to validating the same event (the work every model call already pays).

Run from the repository root:

    .venv/bin/python bench/bench_pricing.py [--repeat 15]

Cases, interleaved in each round (timeit, a quarter of ``Timer.autorange()``'s loop count):
validating one ``model.call`` event with pydantic (the baseline), ``price_call`` for a flat-priced
model with cache counts (the cached rates, the common case), for a tiered model (its rate by
context length, the table's rule) and for usage that cannot be priced. Reported: median µs per
call and the median of per-round ratios to the baseline, which a loaded machine disturbs far
less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

from runs.pricing import price_call
from runs.schemas import ModelCallEvent

EVENT = {
    "id": "ev-1", "type": "model.call", "ts": "2026-12-04T16:00:00Z", "run_id": "r-1", "step": 4,
    "model": "claude-opus-4-5", "input_tokens": 20_000, "output_tokens": 300,
    "cache_read_tokens": 15_000, "cache_write_tokens": 4_000, "duration_ms": 2300,
}  # fmt: skip
USAGE = {"input_tokens": 20_000, "output_tokens": 300, "cache_read_tokens": 15_000,
         "cache_write_tokens": 4_000}  # fmt: skip

CASES: dict[str, Callable[[], object]] = {
    "validate the event (baseline)": lambda: ModelCallEvent.model_validate(EVENT),
    "price, flat rates with cache": lambda: price_call(model="claude-opus-4-5", **USAGE),
    "price, tiered rates with cache": lambda: price_call(model="claude-sonnet-4-5", **USAGE),
    "price, unusable usage": lambda: price_call(
        model="claude-opus-4-5", input_tokens=-1, output_tokens=3
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    for case in CASES.values():
        case()  # warm the table look-up cache, as a running control plane has
    loops = {name: max(1, timeit.Timer(case).autorange()[0] // 4) for name, case in CASES.items()}
    per_call: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeat):
        for name, case in CASES.items():
            seconds = timeit.Timer(case).timeit(loops[name])
            per_call[name].append(seconds / loops[name] * 1e6)
    baseline = per_call["validate the event (baseline)"]
    print(f"load average {os.getloadavg()[0]:.1f}, {args.repeat} rounds")
    print(f"{'case':<38} {'median µs':>10} {'x baseline':>11}")
    for name, values in per_call.items():
        ratio = statistics.median(v / b for v, b in zip(values, baseline, strict=True))
        print(f"{name:<38} {statistics.median(values):>10.2f} {ratio:>11.2f}")


if __name__ == "__main__":
    main()
