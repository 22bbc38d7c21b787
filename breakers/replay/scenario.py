"""The outage story of the README as parameters, and the scripted model's cost model.

Defaults reproduce the story in mode ``none``: 340 runs in a 22-minute window, a 20-step budget,
5 HTTP attempts and 31 s per failing ``web_search`` call, about $1.20 per run and about 3,700
``web_search`` calls in all. Times are in simulated seconds; the replay divides them by ``speed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from decimal import Decimal, InvalidOperation
from typing import Any

from breaker_panel import ToolFailure

__all__ = ("FAILURES", "MODES", "Scenario", "StepCost")

# none: failures fed back to the model. fail-fast: a plain breaker that refuses in microseconds
# but keeps offering the tool. run / worker / fleet: the breaker at that scope removes the tool.
MODES = ("none", "fail-fast", "run", "worker", "fleet")
# How the vendor fails in the window: "503" (every call raises after its retries, the story) or
# "empty" (the vendor answers 200 OK with no results: only a result check sees it).
FAILURES = ("503", "empty")


@dataclass(frozen=True)
class StepCost:
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal
    duration_s: float


@dataclass(frozen=True)
class Scenario:
    runs_in_window: int = 340
    window_s: float = 22 * 60
    # Healthy runs before the outage give the charts their baseline; the tail after it shows how
    # long each breaker keeps a recovered tool away.
    baseline_s: float = 4 * 60
    baseline_runs: int = 40
    tail_s: float = 6 * 60
    tail_runs: int = 60
    workers: int = 8
    step_budget: int = 20
    failing_attempts: int = 5
    failing_call_s: float = 31.0
    healthy_search_s: float = 1.2
    read_page_s: float = 0.5
    # The model re-phrases and searches again on this share of the steps after a failure, and
    # reads a page it already knows on the others: 1 + 18 * 0.55 ≈ 10.9 searches per failed run.
    rephrase_probability: float = 0.55
    model_call_s: float = 1.8
    # The context grows every step: that is why a long, failing run is expensive.
    base_input_tokens: int = 4000
    input_tokens_per_step: int = 700
    output_tokens: int = 270
    usd_per_million_input: Decimal = Decimal("5")
    usd_per_million_output: Decimal = Decimal("25")
    # Model calls a run takes to finish once web_search is gone (1 = it answers on that very
    # step). An assumption, not a measurement: the pages show spend for 1, 2 and 5.
    wrap_up_steps: int = 2
    # The share of its steps on which a model asks for a tool the notice says is gone while the
    # tool is still in its tools array (the ``refuse`` way; ``remove`` and ``restrict`` make it
    # impossible). An assumption, not a measurement.
    ignores_notice_probability: float = 0.1
    threshold: int = 5
    cooldown_s: float = 30.0
    max_cooldown_s: float = 300.0
    # The fleet's spend rule on web_search (0: off, the consecutive rule alone) and its window,
    # in simulated seconds (the control plane's window is this divided by the speed).
    spend_amount_usd: float = 0.0
    spend_window_s: float = 600.0
    # How the vendor fails: "retryable" (the story: 503s, 5 attempts, 31 s a call) or "semantic"
    # (it answers at once that every request is bad, a 400: the streak never counts those).
    failure_outcome: str = "retryable"
    seed: int = 20261129
    failure: str = "503"
    # Count only exceptions, as breakers without result checks do: a returned call is a success
    # whatever it holds (the comparison for failure="empty").
    exception_only: bool = False

    def __post_init__(self) -> None:
        if self.failure not in FAILURES:
            raise ValueError(f"failure must be one of {FAILURES}, got {self.failure!r}")

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Scenario:
        """The scenario a replay recorded (``OutageReplay.scenario``): fields it lacks, or that
        do not parse, keep their defaults (older replays recorded fewer)."""
        values: dict[str, Any] = {}
        for spec in fields(cls):
            if spec.name not in record:
                continue
            kind = type(getattr(cls, spec.name))
            raw = record[spec.name]
            if kind is bool and not isinstance(raw, bool):
                continue  # bool("False") is True: only a JSON boolean is read
            try:
                value = kind(str(raw)) if kind is Decimal else kind(raw)
            except (TypeError, ValueError, InvalidOperation):
                continue
            values[spec.name] = value
        try:
            return cls(**values)
        except (TypeError, ValueError):
            return cls()

    def last_window_start_s(self) -> float:
        """When the last of the story's runs starts, in simulated seconds since the outage began."""
        starts = [s for s in self.run_starts() if self.vendor_is_down(s)]
        return (max(starts) - self.outage_start_s) if starts else 0.0

    @property
    def outage_start_s(self) -> float:
        return self.baseline_s

    @property
    def outage_end_s(self) -> float:
        return self.baseline_s + self.window_s

    @property
    def total_s(self) -> float:
        return self.baseline_s + self.window_s + self.tail_s

    def step_cost(self, step: int) -> StepCost:
        """The model call of ``step`` (1-based): its context holds every step before it."""
        input_tokens = self.base_input_tokens + self.input_tokens_per_step * (step - 1)
        cost = (
            Decimal(input_tokens) * self.usd_per_million_input
            + Decimal(self.output_tokens) * self.usd_per_million_output
        ) / Decimal(1_000_000)
        return StepCost(input_tokens, self.output_tokens, cost, self.model_call_s)

    def run_cost(self, steps: int) -> Decimal:
        """Model spend of a run that made ``steps`` model calls."""
        return sum((self.step_cost(step).cost_usd for step in range(1, steps + 1)), Decimal(0))

    def wrap_up_floor(self, wrap_up_steps: int) -> float:
        """The least a run that loses the tool at once can cost, as a share of a failing run."""
        steps = min(self.step_budget, wrap_up_steps)
        return float(self.run_cost(steps) / self.run_cost(self.step_budget))

    @property
    def failing_run_s(self) -> float:
        """How long a run takes when every search fails (mode ``none``): ~6.3 minutes."""
        searches = 1 + (self.step_budget - 2) * self.rephrase_probability
        reads = self.step_budget - 1 - searches
        return (
            self.step_budget * self.model_call_s
            + searches * self.failing_call_s
            + reads * self.read_page_s
        )

    def run_starts(self) -> list[float]:
        """Start times of every run: evenly spread in each period, so replays are repeatable.

        The story's 340 runs *ran in* the outage window: they start early enough to finish in it
        with every search failing, as the story tells them. Runs after the window show how long
        each breaker keeps the recovered tool away.
        """
        starts: list[float] = []
        # A quarter of a run's length to spare, so a run slowed by a busy machine still ends
        # inside the outage, as the story's runs did.
        window_starts = max(self.window_s - 1.25 * self.failing_run_s, self.window_s / 2)
        for begin, length, count in (
            (0.0, self.baseline_s, self.baseline_runs),
            (self.outage_start_s, window_starts, self.runs_in_window),
            (self.outage_end_s, self.tail_s, self.tail_runs),
        ):
            starts.extend(begin + length * i / count for i in range(count))
        return starts

    def vendor_is_down(self, at_s: float) -> bool:
        return self.outage_start_s <= at_s < self.outage_end_s

    def vendor_failure(self) -> tuple[ToolFailure, float]:
        """What a call to the failing vendor raises, and how long it takes (simulated s)."""
        if self.failure_outcome == "semantic":
            failure = ToolFailure("400 from vendor: unknown parameter 'q'", retryable=False)
            return failure, self.healthy_search_s
        failure = ToolFailure("503 from vendor", retryable=True, attempts=self.failing_attempts)
        return failure, self.failing_call_s
