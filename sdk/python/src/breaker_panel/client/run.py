"""The run handle: one agent run's breakers (run, worker and fleet scope combined), and the
events each of its calls reports through the plane's sender."""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from breaker_panel.client.events import transition_event
from breaker_panel.client.sender import EventSender
from breaker_panel.core import FailureInfo, Removal, ToolBreaker
from breaker_panel.external_scope import ExternalScope
from breaker_panel.result_checks import ResultChecker, Verdict
from breaker_panel.vocabulary import FINISHED_STATUSES, Outcome, Scope, State, Way
from breaker_panel.ways import Toolset, parse_way
from breaker_panel.worker import RunBreakers, WorkerBreakers

_RUN_STATUSES = frozenset(FINISHED_STATUSES)
# A run breaker that never trips: how a plane without run scope still records per-run facts.
NEVER = 2**62


class Plane(Protocol):
    """What a run takes from its plane (a ControlPlane)."""

    scopes: frozenset[Scope]
    threshold: int
    result_checks: ResultChecker
    worker: WorkerBreakers
    fleet: ExternalScope
    sender: EventSender
    runs_in_progress: weakref.WeakSet[Run]


class Run:
    """One agent run: its own breakers combined with the worker's and the fleet's.

    A tool removed from this run by any scope stays removed for the rest of the run. ``step``
    counts model calls (the step of a tool call is that of the model call that asked for it)
    unless the caller passes ``step=`` explicitly.
    """

    def __init__(
        self,
        plane: Plane,
        *,
        run_id: str,
        agent: str,
        step_budget: int | None,
        way: Way | str | None = None,
    ):
        self.plane = plane
        self.way = parse_way(way)  # for toolset(); None: the default of the array's shape
        self._emit = plane.sender.emit
        self._append = plane.sender.append
        self.run_id = run_id
        self.agent = agent
        self.step_budget = step_budget
        self.step = 0
        self.finished = False
        scopes = plane.scopes
        run_breaker = ToolBreaker(
            plane.threshold if Scope.RUN in scopes else NEVER,
            step_budget=step_budget if Scope.RUN in scopes else None,
            clock=plane.worker.clock,
            on_transition=self._on_run_transition,
            classify=plane.worker.classify,
            result_checks=plane.result_checks,
        )
        self.breakers: RunBreakers = RunBreakers(
            run_breaker,
            worker=plane.worker if Scope.WORKER in scopes else None,
            sources=(plane.fleet,) if Scope.FLEET in scopes else (),
            clock=plane.worker.clock,
            on_remove=self._on_removed,
        )
        self._lost = False  # any tool removed from any view of this run (degraded)
        self._announced: set[str] = set()  # wider-scope removals reported and not yet back
        plane.runs_in_progress.add(self)
        # The per-step hot path goes straight to the run's breakers (bench/bench_sdk.py).
        self.available = self.breakers.available  # type: ignore[method-assign]

    # -- the three-line wiring (same calls as ToolBreaker) --------------------------------

    def available[T](self, tools: Iterable[T]) -> list[T]:
        """The tools in the caller's shape, without those this run has lost (any scope)."""
        return self.breakers.available(tools)

    def toolset(
        self, tools: Iterable[Any], *, way: Way | str | None = None, tool_choice: Any = None
    ) -> Toolset:
        """The tools array and `tool_choice` to send this step, the lost tools taken away in
        `way` (default: the run's, else the array's shape's; `breaker_panel.ways`). Under
        `refuse` (and a `restrict` that fell back to it) answer a model's call of a hidden
        tool with `refusal()`."""
        return self.breakers.toolset(
            tools, way=self.way if way is None else way, tool_choice=tool_choice
        )

    def refusal(
        self, tool: str, *, step: int | None = None, breakers: RunBreakers | None = None
    ) -> str | None:
        """None if the model may call `tool`; otherwise the call is recorded as ``blocked``
        and the text to answer it with at once (the notice) is returned: the vendor is never
        called."""
        text = (self.breakers if breakers is None else breakers).refusal(tool)
        if text is not None:
            self.record_blocked(tool, step=step, breakers=breakers)
        return text

    def notice(self) -> str | None:
        """None, or the text for the model naming each removed tool, its scope and last error."""
        return self.breakers.notice()

    def removals(self) -> Mapping[str, Removal]:
        return self.breakers.removals()

    def view(self) -> RunBreakers:
        """A fresh view of the worker's and wider scopes for one call of a long-lived run (an MCP
        gateway's client session): unlike `breakers`, it has lost nothing yet, so a tool that
        came back is seen again. Pass it as `breakers=` to the record methods; close it after."""
        plane = self.plane
        scopes = plane.scopes
        return RunBreakers(
            ToolBreaker(NEVER, clock=plane.worker.clock, classify=plane.worker.classify),
            worker=plane.worker if Scope.WORKER in scopes else None,
            sources=(plane.fleet,) if Scope.FLEET in scopes else (),
            clock=plane.worker.clock,
            on_remove=self._on_removed,
        )

    def record_success(
        self,
        tool: str,
        *,
        duration_ms: int | None = None,
        attempts: int = 1,
        step: int | None = None,
        breakers: RunBreakers | None = None,
    ) -> None:
        if breakers is None:
            breakers = self.breakers
        else:
            self._announced.discard(tool)  # called again: a later removal is news
        # Before recording, which ends the trial; the usual case (no fleet trial) without a call.
        trial = False if not breakers._fleet_trials else breakers.holds_fleet_trial(tool)
        breakers.record_success(tool)
        # The per-call hot path (bench/bench_sdk.py): the event is a tuple built in one
        # expression; its JSON is built on the sender thread (events.materialize).
        self._append(
            (
                time.time(),
                self.run_id,
                self.step if step is None else step,
                tool,
                Outcome.SUCCESS,
                attempts,
                duration_ms,
                "",
                trial,
            )
        )

    def record_result(
        self,
        tool: str,
        result: object,
        *,
        arguments: Mapping[str, object] | None = None,
        duration_ms: int | None = None,
        attempts: int = 1,
        step: int | None = None,
        breakers: RunBreakers | None = None,
    ) -> Verdict:
        """A call of `tool` returned `result`: the plane's result checks decide whether it is a
        success or `degraded` (counted like a retryable failure, its reason in the event's
        `error`). `result` is only read; hand it to the model unchanged either way."""
        verdict = self.plane.result_checks.check(tool, result, arguments)
        failure = verdict.failure()
        if failure is None:
            self.record_success(
                tool, duration_ms=duration_ms, attempts=attempts, step=step, breakers=breakers
            )
        else:
            self.record_failure(
                tool, failure, duration_ms=duration_ms, step=step, breakers=breakers
            )
        return verdict

    def record_failure(
        self,
        tool: str,
        failure: BaseException | str | None = None,
        *,
        duration_ms: int | None = None,
        step: int | None = None,
        breakers: RunBreakers | None = None,
    ) -> FailureInfo:
        """Count an exhausted call, classified by the plane's ``classify`` (a ``ToolFailure``
        says retryable or semantic itself, and how many HTTP attempts it made)."""
        if breakers is None:
            breakers = self.breakers
        else:
            self._announced.discard(tool)
        trial = breakers.holds_fleet_trial(tool)  # before recording: that ends the trial
        info = breakers.record_failure(tool, failure)
        self._tool_event(
            tool, info.outcome, info.attempts, duration_ms, info.error, step, trial=trial
        )
        return info

    def record_blocked(
        self, tool: str, *, step: int | None = None, breakers: RunBreakers | None = None
    ) -> None:
        """The model asked for a tool this run no longer offers; it was refused locally."""
        reason = (self.breakers if breakers is None else breakers).removals().get(tool)
        error = f"blocked by the {reason.scope} breaker" if reason else "blocked"
        self._tool_event(tool, Outcome.BLOCKED, 0, 0, error, step)

    def record_model_call(
        self,
        *,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float | None = None,
        model: str = "",
        duration_ms: int | None = None,
        step: int | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        provider: str = "",
    ) -> None:
        """Report one model call. ``input_tokens`` counts every input token, the cached ones
        too: ``cache_read_tokens`` and ``cache_write_tokens`` are the parts read from and
        written to the provider's prompt cache (None: not known). Without ``cost_usd`` the
        control plane prices the tokens from its price table (``provider`` helps it find the
        model), or marks the call's price unknown."""
        self.step += 1
        event: dict[str, object] = {
            "type": "model.call",
            "run_id": self.run_id,
            "step": self.step if step is None else step,
            "model": model,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cost_usd": cost_usd,
            "duration_ms": duration_ms,
        }
        # Only what is known is sent: an older control plane ignores fields it does not know.
        if cache_read_tokens is not None:
            event["cache_read_tokens"] = cache_read_tokens
        if cache_write_tokens is not None:
            event["cache_write_tokens"] = cache_write_tokens
        if provider:
            event["provider"] = provider
        self._emit(event)

    def finish(
        self, *, status: str = "completed", degraded: bool | None = None, steps: int | None = None
    ) -> None:
        """End the run. ``degraded`` defaults to whether the run lost any tool."""
        if self.finished:
            return
        if status not in _RUN_STATUSES:
            raise ValueError(f"status must be one of {sorted(_RUN_STATUSES)}, got {status!r}")
        self.finished = True
        lost_a_tool = self._lost or bool(self.breakers.removals())
        self.breakers.close()
        self.plane.runs_in_progress.discard(self)
        self._emit(
            {
                "type": "run.finished",
                "run_id": self.run_id,
                "status": status,
                "degraded": lost_a_tool if degraded is None else bool(degraded),
                "steps": self.step if steps is None else steps,
            }
        )

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.finish(status="completed" if exc_type is None else "failed")

    # -- internals -------------------------------------------------------------------------

    def _tool_event(
        self,
        tool: str,
        outcome: Outcome,
        attempts: int,
        duration_ms: int | None,
        error: str,
        step: int | None,
        *,
        trial: bool = False,
    ) -> None:
        step = self.step if step is None else step
        record = (
            time.time(),
            self.run_id,
            step,
            tool,
            outcome,
            attempts,
            duration_ms,
            error,
            trial,
        )
        self._append(record)

    def _on_removed(self, removal: Removal) -> None:
        # The run's own breaker reports its transition itself; a wider scope's removal is reported
        # as seen by this run, so its page can show when and by which scope it lost the tool;
        # once per removal, however many views (one per gateway call) see it.
        self._lost = True
        if removal.scope is not Scope.RUN and removal.tool not in self._announced:
            self._announced.add(removal.tool)
            self._emit(
                transition_event(
                    removal.tool, removal.scope, State.OPEN, removal.reason, run_id=self.run_id
                )
            )

    def _on_run_transition(
        self, tool: str, scope: Scope, old_state: State, new_state: State, reason: str, /
    ) -> None:
        self._emit(transition_event(tool, scope, new_state, reason, run_id=self.run_id))
