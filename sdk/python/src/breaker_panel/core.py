"""The breaker core: outcomes, ToolFailure, and the per-tool consecutive-failure state machine.

Pure Python with no Django and no I/O: an agent process imports it without settings, and
`available()` / `record_*()` only ever touch in-process state.

States are the contract strings of `vocabulary.py`. The transitions of one tool's `Circuit`:

    closed    -> open       `threshold` consecutive retryable (or degraded) failures
    open      -> half_open  the cooldown has elapsed and the one trial call is granted
    half_open -> closed     the trial call succeeded; the cooldown goes back to its base
    half_open -> open       the trial call failed again; the cooldown backs off, capped

A run-scope `ToolBreaker` has an infinite cooldown, so it only ever takes the first transition:
a tool removed inside a run stays removed for the rest of that run.
"""

from __future__ import annotations

import math
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple, Protocol

from breaker_panel.classify import (
    DEGRADED_PREFIX,
    Classifier,
    DegradedResult,
    ToolFailure,
    exception_text,
)
from breaker_panel.classify import classify as default_classify
from breaker_panel.notice import Removal, SemanticStrike, render_notice
from breaker_panel.result_checks import ResultChecker, Verdict
from breaker_panel.toolsets import StepFilter
from breaker_panel.vocabulary import Outcome, Scope, State, Way
from breaker_panel.ways import Toolset, take_away

__all__ = [
    "BUDGET_FRACTION_LIMIT",
    "Change",
    "Circuit",
    "Clock",
    "DegradedResult",
    "FailureInfo",
    "Outcome",
    "Policy",
    "Removal",
    "Scope",
    "SemanticStrike",
    "State",
    "StepBudgetWarning",
    "ToolBreaker",
    "ToolFailure",
    "TransitionCallback",
    "check_step_budget",
    "describe_failure",
    "step_budget_fraction",
    "streak_reason",
]

Clock = Callable[[], float]


class FailureInfo(NamedTuple):
    """A recorded failure as the reporting client needs it for a `tool.call` event."""

    outcome: Outcome
    error: str  # "ToolFailure: 503 from vendor", the event contract's `error` field
    attempts: int


def describe_failure(
    failure: BaseException | str | None, classify: Classifier = default_classify
) -> FailureInfo:
    """Classify whatever an agent hands to `record_failure()` with `classify` (see
    `breaker_panel.classify`); the error text is always the original's.

    Unknown failures count as retryable: a tool that keeps raising is unusable to the model
    whatever the cause, and the breaker must not crash the agent loop over an unwrapped
    `ConnectionError` or a bare string.
    """
    if isinstance(failure, DegradedResult):
        return FailureInfo(failure.outcome, DEGRADED_PREFIX + failure.message, failure.attempts)
    if isinstance(failure, ToolFailure):
        return FailureInfo(failure.outcome, f"ToolFailure: {failure.message}", failure.attempts)
    verdict = classify(failure)
    if not isinstance(verdict, ToolFailure):
        raise TypeError(f"a classifier must return a ToolFailure, got {verdict!r:.100}")
    if isinstance(failure, BaseException):
        error = exception_text(failure)
    else:
        error = "unknown error" if failure is None else str(failure)
    return FailureInfo(verdict.outcome, error, verdict.attempts)


class TransitionCallback(Protocol):
    """Told about every state change so a reporting client can emit `breaker.transition`.

    Called after the breaker's lock is released, so it may call back into the breaker; an
    exception it raises reaches the caller of `record_*()` (the state change itself is done).
    """

    def __call__(
        self, tool: str, scope: Scope, old_state: State, new_state: State, reason: str, /
    ) -> None: ...


class Change(NamedTuple):
    old: State
    new: State
    reason: str


@dataclass(frozen=True, slots=True)
class Policy:
    """How a circuit trips and recovers. The defaults are run scope: it never recovers."""

    threshold: int = 5
    cooldown: float = math.inf
    max_cooldown: float = math.inf
    backoff: float = 2.0

    def __post_init__(self) -> None:
        if self.threshold < 1:
            raise ValueError(f"threshold must be at least 1, got {self.threshold}")
        if not 0 < self.cooldown <= self.max_cooldown:
            raise ValueError("need 0 < cooldown <= max_cooldown")
        if self.backoff < 1:
            raise ValueError(f"backoff must be at least 1, got {self.backoff}")


class Circuit:
    """One tool's consecutive-failure state machine; the caller holds any lock and owns time.

    closed    -> open       `record_retryable()` reaches `policy.threshold` in a row
    open      -> half_open  `begin_trial()` once `cooldown` has elapsed since opening
    half_open -> closed     `record_success()`; the cooldown goes back to `policy.cooldown`
    half_open -> open       `record_retryable()`; the cooldown is multiplied by `policy.backoff`
                            up to `policy.max_cooldown`

    A success while closed resets the count; while open it changes nothing, because only the
    trial call may close a breaker (a late answer from before the trip proves little).
    """

    __slots__ = (
        "attempts",
        "consecutive",
        "cooldown",
        "degraded",
        "last_error",
        "opened_at",
        "policy",
        "state",
    )

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.state = State.CLOSED
        self.consecutive = 0
        self.degraded = 0  # how many of the current streak were degraded results
        self.last_error = ""
        self.attempts = 0  # HTTP attempts of the last failed call: recorded, never counted
        self.opened_at = 0.0
        self.cooldown = policy.cooldown

    def record_success(self) -> Change | None:
        self.consecutive = self.degraded = 0
        if self.state is not State.HALF_OPEN:
            return None
        self.state = State.CLOSED
        self.cooldown = self.policy.cooldown
        return Change(State.HALF_OPEN, State.CLOSED, "trial call succeeded")

    def record_retryable(
        self, error: str, attempts: int, clock: Clock, *, degraded: bool = False
    ) -> Change | None:
        """A counted failure: retryable, or (``degraded``) a result that failed a check."""
        self.last_error = error
        self.attempts = attempts
        if self.state is State.CLOSED:
            self.degraded += degraded
            return self._count_failure(clock)
        if self.state is State.HALF_OPEN:
            return self._reopen(clock)
        return None

    def cooldown_elapsed(self, now: float) -> bool:
        return self.state is State.OPEN and now - self.opened_at >= self.cooldown

    def begin_trial(self, now: float) -> Change | None:
        if not self.cooldown_elapsed(now):
            return None
        self.state = State.HALF_OPEN
        reason = f"cooldown of {self.cooldown:g} s elapsed; one trial call allowed"
        return Change(State.OPEN, State.HALF_OPEN, reason)

    def _count_failure(self, clock: Clock) -> Change | None:
        self.consecutive += 1
        if self.consecutive < self.policy.threshold:
            return None
        self.state = State.OPEN
        self.opened_at = clock()
        return Change(State.CLOSED, State.OPEN, streak_reason(self.consecutive, self.degraded))

    def _reopen(self, clock: Clock) -> Change:
        self.state = State.OPEN
        self.opened_at = clock()
        self.cooldown = min(self.cooldown * self.policy.backoff, self.policy.max_cooldown)
        reason = f"trial call failed; next cooldown {self.cooldown:g} s"
        return Change(State.HALF_OPEN, State.OPEN, reason)


def streak_reason(consecutive: int, degraded: int) -> str:
    """Why a streak opened a breaker: "5 consecutive retryable failures" when no result check
    was involved (the words every existing page and alert knows), else says how many degraded."""
    if not degraded:
        return f"{consecutive} consecutive retryable failures"
    if degraded >= consecutive:
        return f"{consecutive} consecutive degraded results"
    return f"{consecutive} consecutive failures ({degraded} degraded results)"


class ToolBreaker:
    """Run scope: one breaker per tool for a single agent run, no server needed.

    closed -> open   after `threshold` consecutive retryable failures of one tool in this run.
                     There is no way back inside the run: the tool stays out of `available()`.

    A success resets the tool's count. A semantic failure (`ToolFailure(retryable=False)`)
    neither counts nor resets; it feeds a separate per-tool counter capped at `SEMANTIC_CAP`,
    at which `notice()` tells the model to change its approach with that tool (which stays).
    A success clears that counter too: the model has found a way to call it.

    Thread-safe: parallel tool calls of one run may record at the same time.
    """

    THRESHOLD: ClassVar[int] = 5
    SEMANTIC_CAP: ClassVar[int] = 3
    scope: ClassVar[Scope] = Scope.RUN

    def __init__(
        self,
        threshold: int | None = None,
        *,
        semantic_cap: int | None = None,
        step_budget: int | None = None,
        clock: Clock = time.monotonic,
        on_transition: TransitionCallback | None = None,
        classify: Classifier | None = None,
        result_checks: ResultChecker | None = None,
    ) -> None:
        self.threshold = self.THRESHOLD if threshold is None else threshold
        self.classify: Classifier = default_classify if classify is None else classify
        # Built on first use: a run that never records a result pays nothing for the checks.
        self._result_checks = result_checks
        self.semantic_cap = self.SEMANTIC_CAP if semantic_cap is None else semantic_cap
        if self.semantic_cap < 1:
            raise ValueError(f"semantic_cap must be at least 1, got {self.semantic_cap}")
        self._policy = Policy(threshold=self.threshold)
        self._clock = clock
        self._on_transition = on_transition
        self._lock = threading.Lock()
        self._circuits: dict[str, Circuit] = {}
        self._semantic: dict[str, SemanticStrike] = {}
        # Replaced, never mutated, on each change: the hot path reads them without the lock.
        self._removals: Mapping[str, Removal] = MappingProxyType({})
        self._removed: frozenset[str] = frozenset()
        self._filter = StepFilter().filter
        self._settled: frozenset[str] | None = None  # removed at the first toolset()
        self.version = 0  # bumped whenever the notice would change
        self._notice: tuple[int, str | None] = (0, None)
        self.budget_warning = (
            False if step_budget is None else check_step_budget(self.threshold, step_budget)
        )

    # -- recording -------------------------------------------------------------------------

    def record_success(self, name: str) -> None:
        """A call of `name` succeeded: its consecutive and semantic counts go back to 0."""
        circuit = self._circuits.get(name)
        if (circuit is None or circuit.consecutive == 0) and name not in self._semantic:
            # Nothing to reset, the usual case: skip the lock. A failure recorded concurrently
            # simply orders after this success, which is a valid order for concurrent calls.
            return
        with self._lock:
            circuit = self._circuits.get(name)
            if circuit is not None:
                circuit.consecutive = circuit.degraded = 0  # open stays open in run scope
            if self._semantic.pop(name, None) is not None:
                self.version += 1

    @property
    def result_checks(self) -> ResultChecker:
        """The checks `record_result()` runs (every built-in check on every tool by default)."""
        if self._result_checks is None:
            self._result_checks = ResultChecker()
        return self._result_checks

    def record_result(
        self, name: str, result: object, *, arguments: Mapping[str, object] | None = None
    ) -> Verdict:
        """A call of `name` returned `result` (only read, never changed): a success, unless a
        result check finds it degraded, which counts like a retryable failure. A result the
        checks could not read is recorded as a success (it says nothing either way)."""
        verdict = self.result_checks.check(name, result, arguments)
        failure = verdict.failure()
        if failure is None:
            self.record_success(name)
        else:
            self.record_failure(name, failure)
        return verdict

    def record_failure(self, name: str, failure: BaseException | str | None = None) -> FailureInfo:
        """A call of `name` was exhausted; returns its classification (see `describe_failure`)."""
        info = describe_failure(failure, self.classify)
        if info.outcome is Outcome.SEMANTIC:
            self._record_semantic(name, info.error)
        else:
            self._record_retryable(name, info)
        return info

    def _record_retryable(self, name: str, info: FailureInfo) -> None:
        with self._lock:
            circuit = self._circuits.get(name)
            if circuit is None:
                circuit = self._circuits[name] = Circuit(self._policy)
            change = circuit.record_retryable(
                info.error, info.attempts, self._clock, degraded=info.outcome is Outcome.DEGRADED
            )
            if change is not None:
                self._publish(
                    Removal(name, Scope.RUN, change.reason, info.error, circuit.opened_at)
                )
        if change is not None and self._on_transition is not None:
            self._on_transition(name, Scope.RUN, change.old, change.new, change.reason)

    def _record_semantic(self, name: str, error: str) -> None:
        with self._lock:
            previous = self._semantic.get(name)
            # Counted past the cap, so the notice says how many calls really failed.
            count = (previous.count if previous else 0) + 1
            self._semantic[name] = SemanticStrike(name, count, error)
            if count >= self.semantic_cap:
                self.version += 1  # the notice names the latest error

    def _publish(self, removal: Removal) -> None:
        self._removals = MappingProxyType({**self._removals, removal.tool: removal})
        self._removed = frozenset(self._removals)
        self.version += 1

    # -- reading ---------------------------------------------------------------------------

    def available[T](self, tools: Iterable[T]) -> list[T]:
        """A new list in the caller's own shape without the removed tools; `tools` is untouched."""
        return self._filter(tools, self._removed)

    def toolset(
        self, tools: Iterable[Any], *, way: Way | str | None = None, tool_choice: Any = None
    ) -> Toolset:
        """The tools array and `tool_choice` to send, with the removed tools taken away in `way`
        (`remove`, `restrict` or `refuse`; None: the default for the array's provider shape)."""
        removed = self._removed
        if self._settled is None:
            self._settled = removed  # lost before the first call: removed by the default way
        return take_away(
            tools,
            removed,
            way=way,
            tool_choice=tool_choice,
            filter=self._filter,
            settled=self._settled,
        )

    def refusal(self, name: str) -> str | None:
        """None if the model may call `name`; otherwise the text to answer its call with at
        once (the notice), without calling the tool."""
        if name not in self._removed:
            return None
        return self.notice() or f"{name} is unavailable for the rest of this task."

    def notice(self) -> str | None:
        """None while nothing is open or capped; otherwise the short text to send the model."""
        version, text = self._notice
        if version != self.version:
            text = render_notice(self._removals.values(), self.semantic_strikes())
            self._notice = (self.version, text)
        return text

    def is_open(self, name: str) -> bool:
        return name in self._removed

    def open_tools(self) -> tuple[str, ...]:
        return tuple(sorted(self._removed))

    def removals(self) -> Mapping[str, Removal]:
        return self._removals

    def state(self, name: str) -> State:
        return State.OPEN if name in self._removed else State.CLOSED

    def consecutive(self, name: str) -> int:
        circuit = self._circuits.get(name)
        return 0 if circuit is None else circuit.consecutive

    def last_error(self, name: str) -> str:
        """The latest retryable error this run recorded for `name` ("" if none). Semantic
        rejections are left out: they say nothing about why a breaker removed the tool."""
        circuit = self._circuits.get(name)
        return "" if circuit is None else circuit.last_error

    def semantic_strikes(self) -> list[SemanticStrike]:
        """Tools at the semantic cap and still available, by name."""
        strikes = list(self._semantic.values())
        return sorted(
            (s for s in strikes if s.count >= self.semantic_cap and s.tool not in self._removed),
            key=lambda strike: strike.tool,
        )


# -- step budget -----------------------------------------------------------------------------

BUDGET_FRACTION_LIMIT = Fraction(1, 4)


class StepBudgetWarning(UserWarning):
    """threshold / step budget is above 25%: too much of a run goes on proving a tool is down."""


def step_budget_fraction(threshold: int, step_budget: int) -> Fraction:
    """The share of a run's steps spent proving a tool is down before it is removed.

    Exact (a Fraction) so that 5 / 20 is exactly at the 25% limit rather than a float near it.
    """
    if step_budget < 1:
        raise ValueError(f"step_budget must be at least 1, got {step_budget}")
    return Fraction(threshold, step_budget)


def check_step_budget(threshold: int, step_budget: int) -> bool:
    """Warn (StepBudgetWarning) and return True when the fraction exceeds 25%."""
    fraction = step_budget_fraction(threshold, step_budget)
    if fraction <= BUDGET_FRACTION_LIMIT:
        return False
    warnings.warn(
        f"threshold {threshold} is {float(fraction):.0%} of a {step_budget}-step budget "
        f"(limit {float(BUDGET_FRACTION_LIMIT):.0%}): lower the threshold or raise the budget",
        StepBudgetWarning,
        stacklevel=3,
    )
    return True
