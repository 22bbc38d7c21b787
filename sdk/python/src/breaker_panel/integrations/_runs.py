"""What every integration does per invocation: turn the breaker it was given into one run.

    ToolBreaker      the run itself (run scope, no server): one invocation, one run
    WorkerBreakers   a new `RunBreakers` per invocation, sharing the worker's breakers
    ControlPlane     a new control-plane `Run` per invocation, reporting model calls too

`RunHandle` gives the integrations one set of calls for all three.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from breaker_panel.client import ControlPlane, Run
from breaker_panel.core import FailureInfo, ToolBreaker
from breaker_panel.result_checks import Verdict
from breaker_panel.vocabulary import Way
from breaker_panel.ways import Toolset
from breaker_panel.worker import RunBreakers, WorkerBreakers

__all__ = ["Breaker", "Price", "RunHandle", "run_factory"]

Breaker = ToolBreaker | WorkerBreakers | ControlPlane
# (model name, input tokens, output tokens) -> cost in USD; the frameworks report no prices.
Price = Callable[[str, int, int], float]


def _no_price(model: str, input_tokens: int, output_tokens: int) -> float:
    return 0.0


class RunHandle:
    """One invocation's run, whatever the breaker behind it. Thread-safe as its breaker is."""

    __slots__ = ("_breakers", "_price", "_run", "finished")

    def __init__(
        self, breakers: ToolBreaker | RunBreakers, run: Run | None, price: Price = _no_price
    ) -> None:
        self._breakers = breakers
        self._run = run
        self._price = price
        self.finished = False

    def available[T](self, tools: Iterable[T]) -> list[T]:
        return self._breakers.available(tools)

    def toolset(self, tools: Iterable[Any], way: Way | str | None) -> Toolset:
        return self._breakers.toolset(tools, way=way)

    def notice(self) -> str | None:
        return self._breakers.notice()

    def is_open(self, name: str) -> bool:
        return self._breakers.is_open(name)

    def refusal(self, name: str) -> str:
        """What a model that still calls the removed `name` is told instead of an answer."""
        return self.notice() or f"{name} is unavailable for the rest of this task."

    def record_success(self, name: str, *, started: float | None = None) -> None:
        if self._run is not None:
            self._run.record_success(name, duration_ms=_elapsed_ms(started))
        else:
            self._breakers.record_success(name)

    def record_result(
        self,
        name: str,
        result: Any,
        *,
        arguments: Mapping[str, Any] | None = None,
        started: float | None = None,
    ) -> Verdict:
        """The tool returned `result`: a success unless a result check finds it degraded."""
        if self._run is not None:
            return self._run.record_result(
                name, result, arguments=arguments, duration_ms=_elapsed_ms(started)
            )
        return self._breakers.record_result(name, result, arguments=arguments)

    def record_failure(self, name: str, error: Any, *, started: float | None = None) -> FailureInfo:
        if self._run is not None:
            return self._run.record_failure(name, error, duration_ms=_elapsed_ms(started))
        return self._breakers.record_failure(name, error)

    def record_blocked(self, name: str) -> None:
        if self._run is not None:
            self._run.record_blocked(name)

    def record_model_call(
        self, *, model: str, input_tokens: int, output_tokens: int, started: float | None = None
    ) -> None:
        if self._run is not None:
            self._run.record_model_call(
                model=model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost_usd=self._price(model, input_tokens, output_tokens),
                duration_ms=_elapsed_ms(started),
            )

    def finish(self, status: str = "completed") -> None:
        if self.finished:
            return
        self.finished = True
        if self._run is not None:
            self._run.finish(status=status)
        elif isinstance(self._breakers, RunBreakers):
            self._breakers.close()  # hands back any worker trial lease it never used


def run_factory(
    breaker: Breaker, *, agent: str, price: Price | None = None
) -> Callable[[], RunHandle]:
    """A callable making one `RunHandle` per invocation; TypeError for anything else."""
    cost = price or _no_price
    if isinstance(breaker, ToolBreaker):
        return lambda: RunHandle(breaker, None, cost)
    if isinstance(breaker, WorkerBreakers):
        return lambda: RunHandle(breaker.start_run(), None, cost)
    if isinstance(breaker, ControlPlane):

        def start() -> RunHandle:
            run = breaker.start_run(agent=agent)
            return RunHandle(run.breakers, run, cost)

        return start
    raise TypeError(
        "breaker must be a ToolBreaker, WorkerBreakers or ControlPlane, "
        f"got {type(breaker).__name__}"
    )


def now() -> float:
    return time.monotonic()


def _elapsed_ms(started: float | None) -> int | None:
    return None if started is None else max(0, round((time.monotonic() - started) * 1000))
