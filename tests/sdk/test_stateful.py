"""Hypothesis stateful tests: the breakers against simple reference models.

Random sequences of outcomes (success, retryable, semantic, plain exceptions), trial requests
and clock advances; after every step the real breaker must agree with a model written
independently of it, in the plainest way the breaker rules can be written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from breaker_panel import RunBreakers, ToolBreaker, ToolFailure, WorkerBreakers
from breaker_panel.toolsets import tool_name
from breaker_panel.worker import TrialLease
from tests.sdk.support import FakeClock, TransitionLog, chat_tools

TOOLS = ("a", "b", "c")
THRESHOLD = 3
SEMANTIC_CAP = 3
COOLDOWN, MAX_COOLDOWN, LEASE = 30.0, 60.0, 100.0  # the cap is hit on the second re-open

tools = st.sampled_from(TOOLS)
# Whole seconds keep float arithmetic exact, and land on and around every boundary.
advances = st.sampled_from([1.0, 10.0, 29.0, 30.0, 31.0, 59.0, 60.0, 99.0, 100.0, 250.0])
STATEFUL = settings(max_examples=150, stateful_step_count=60, deadline=None)


def retryable(attempts: int = 1) -> ToolFailure:
    return ToolFailure("503", retryable=True, attempts=attempts)


def semantic() -> ToolFailure:
    return ToolFailure("400", retryable=False)


# -- run scope -------------------------------------------------------------------------------


@dataclass
class RunModel:
    count: dict[str, int] = field(default_factory=dict)
    open: set[str] = field(default_factory=set)
    rejected: dict[str, int] = field(default_factory=dict)

    def success(self, tool: str) -> None:
        self.count[tool] = 0
        self.rejected.pop(tool, None)

    def retryable(self, tool: str) -> None:
        if tool in self.open:
            return  # an open tool has nothing left to prove
        self.count[tool] = self.count.get(tool, 0) + 1
        if self.count[tool] >= THRESHOLD:
            self.open.add(tool)

    def semantic(self, tool: str) -> None:
        self.rejected[tool] = min(self.rejected.get(tool, 0) + 1, SEMANTIC_CAP)

    def capped(self) -> list[str]:
        return sorted(
            t for t, n in self.rejected.items() if n >= SEMANTIC_CAP and t not in self.open
        )


class RunBreakerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.breaker = ToolBreaker(threshold=THRESHOLD)
        self.model = RunModel()

    @rule(tool=tools)
    def success(self, tool: str) -> None:
        self.breaker.record_success(tool)
        self.model.success(tool)

    @rule(tool=tools, attempts=st.integers(1, 6))
    def retryable_failure(self, tool: str, attempts: int) -> None:
        self.breaker.record_failure(tool, retryable(attempts))
        self.model.retryable(tool)

    @rule(tool=tools)
    def plain_exception(self, tool: str) -> None:
        self.breaker.record_failure(tool, ConnectionError("reset"))
        self.model.retryable(tool)

    @rule(tool=tools)
    def semantic_failure(self, tool: str) -> None:
        self.breaker.record_failure(tool, semantic())
        self.model.semantic(tool)

    @invariant()
    def same_open_tools(self) -> None:
        assert self.breaker.open_tools() == tuple(sorted(self.model.open))

    @invariant()
    def same_counts(self) -> None:
        for tool in TOOLS:
            assert self.breaker.consecutive(tool) == self.model.count.get(tool, 0)

    @invariant()
    def same_semantic_strikes(self) -> None:
        assert [s.tool for s in self.breaker.semantic_strikes()] == self.model.capped()

    @invariant()
    def available_offers_exactly_the_closed_tools(self) -> None:
        offered = [tool_name(t) for t in self.breaker.available(chat_tools(*TOOLS))]
        assert offered == [t for t in TOOLS if t not in self.model.open]

    @invariant()
    def notice_speaks_only_when_there_is_something_to_say(self) -> None:
        text = self.breaker.notice()
        assert (text is None) == (not self.model.open and not self.model.capped())
        for tool in self.model.open:
            assert f"- {tool}: it keeps failing (last error: " in (text or "")


TestRunBreakerAgainstModel = RunBreakerMachine.TestCase
TestRunBreakerAgainstModel.settings = STATEFUL


# -- worker scope ----------------------------------------------------------------------------


@dataclass
class ToolModel:
    state: str = "closed"
    count: int = 0
    opened_at: float = 0.0
    cooldown: float = COOLDOWN
    trial: int | None = None  # token of the current lease
    trial_expires: float = 0.0


class WorkerBreakerMachine(RuleBasedStateMachine):
    TOOLS = ("a", "b")  # two are enough to show tools are independent; fewer reach back-off

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.log = TransitionLog()
        self.worker = WorkerBreakers(
            threshold=THRESHOLD,
            cooldown=COOLDOWN,
            max_cooldown=MAX_COOLDOWN,
            trial_lease=LEASE,
            clock=self.clock,
            on_transition=self.log,
        )
        self.model = {tool: ToolModel() for tool in self.TOOLS}
        self.expected: list[tuple[str, str, str, str]] = []
        self.leases: dict[str, TrialLease] = {}  # the latest lease we got, maybe stale

    def move(self, tool: str, new: str) -> None:
        self.expected.append((tool, "worker", self.model[tool].state, new))
        self.model[tool].state = new

    def lease(self, tool: str, use: bool) -> TrialLease | None:
        return self.leases.get(tool) if use else None

    def is_current(self, tool: str, lease: TrialLease | None) -> bool:
        return lease is not None and lease.token == self.model[tool].trial

    @rule(seconds=advances)
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(tool=st.sampled_from(TOOLS), use=st.booleans())
    def success(self, tool: str, use: bool) -> None:
        lease = self.lease(tool, use)
        self.worker.record_success(tool, lease=lease)
        m = self.model[tool]
        if m.state == "closed":
            m.count = 0
        elif m.state == "half_open" and self.is_current(tool, lease):
            self.move(tool, "closed")
            m.count, m.cooldown, m.trial = 0, COOLDOWN, None

    @rule(tool=st.sampled_from(TOOLS), use=st.booleans())
    def retryable_failure(self, tool: str, use: bool) -> None:
        lease = self.lease(tool, use)
        self.worker.record_failure(tool, retryable(), lease=lease)
        m = self.model[tool]
        if m.state == "closed":
            m.count += 1
            if m.count >= THRESHOLD:
                self.move(tool, "open")
                m.opened_at = self.clock.now
        elif m.state == "half_open" and self.is_current(tool, lease):
            self.move(tool, "open")
            m.opened_at, m.trial = self.clock.now, None
            m.cooldown = min(m.cooldown * 2, MAX_COOLDOWN)

    @rule(tool=st.sampled_from(TOOLS), use=st.booleans())
    def semantic_failure(self, tool: str, use: bool) -> None:
        self.worker.record_failure(tool, semantic(), lease=self.lease(tool, use))

    @rule(tool=st.sampled_from(TOOLS))
    def acquire_trial(self, tool: str) -> None:
        lease = self.worker.acquire_trial(tool)
        m, now = self.model[tool], self.clock.now
        if m.state == "open" and now - m.opened_at >= m.cooldown:
            self.move(tool, "half_open")
            due = True
        else:
            due = m.state == "half_open" and (m.trial is None or now >= m.trial_expires)
        assert (lease is not None) == due
        if lease is not None:
            m.trial, m.trial_expires = lease.token, now + LEASE
            self.leases[tool] = lease

    @rule(tool=st.sampled_from(TOOLS))
    def release_trial(self, tool: str) -> None:
        lease = self.leases.get(tool)
        if lease is None:
            return
        self.worker.release_trial(lease)
        if self.is_current(tool, lease):
            self.model[tool].trial = None

    # Two macros made of the rules above, so that long histories (several failed trials in a
    # row, hence the back-off cap) come up often rather than by luck.
    @rule(tool=st.sampled_from(TOOLS))
    def trip(self, tool: str) -> None:
        for _ in range(THRESHOLD):
            self.retryable_failure(tool, use=False)

    @rule(tool=st.sampled_from(TOOLS), works=st.booleans())
    def trial_after_cooldown(self, tool: str, works: bool) -> None:
        self.advance(self.model[tool].cooldown)
        self.acquire_trial(tool)
        if works:
            self.success(tool, use=True)
        else:
            self.retryable_failure(tool, use=True)

    @invariant()
    def same_states(self) -> None:
        for tool, m in self.model.items():
            assert self.worker.state(tool) == m.state
            assert self.worker.consecutive(tool) == m.count
            assert self.worker.cooldown(tool) == m.cooldown

    @invariant()
    def same_open_tools(self) -> None:
        expected = tuple(sorted(t for t, m in self.model.items() if m.state != "closed"))
        assert self.worker.open_tools() == expected

    @invariant()
    def same_trial_holders(self) -> None:
        for tool, lease in self.leases.items():
            assert self.worker.holds_trial(lease) == self.is_current(tool, lease)

    @invariant()
    def same_transitions(self) -> None:
        assert self.log.moves() == self.expected


TestWorkerBreakerAgainstModel = WorkerBreakerMachine.TestCase
TestWorkerBreakerAgainstModel.settings = STATEFUL


# -- runs sharing a worker: stickiness and one trial -----------------------------------------


class RunsSharingAWorker(RuleBasedStateMachine):
    """Several runs over one worker: what each run loses it never gets back, and a tool the
    worker holds open is offered to at most one run at a time (the trial holder)."""

    RUNS = 3
    TOOLS = ("a", "b")  # fewer tools and a lower threshold reach trials and re-closes sooner

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.worker = WorkerBreakers(threshold=2, cooldown=COOLDOWN, clock=self.clock)
        self.runs = [self.worker.start_run() for _ in range(self.RUNS)]
        self.lost: list[set[str]] = [set() for _ in range(self.RUNS)]

    def run(self, index: int) -> RunBreakers:
        return self.runs[index]

    @rule(seconds=advances)
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(index=st.integers(0, RUNS - 1), tool=st.sampled_from(TOOLS))
    def success(self, index: int, tool: str) -> None:
        self.run(index).record_success(tool)

    @rule(index=st.integers(0, RUNS - 1), tool=st.sampled_from(TOOLS))
    def retryable_failure(self, index: int, tool: str) -> None:
        self.run(index).record_failure(tool, retryable())

    @rule(index=st.integers(0, RUNS - 1), tool=st.sampled_from(TOOLS))
    def semantic_failure(self, index: int, tool: str) -> None:
        self.run(index).record_failure(tool, semantic())

    @rule(index=st.integers(0, RUNS - 1))
    def step(self, index: int) -> None:
        run = self.run(index)
        offered = {tool_name(t) for t in run.available(chat_tools(*self.TOOLS))}
        removed = set(run.removals())
        assert self.lost[index] <= removed, "a run got a lost tool back"
        assert not offered & removed
        self.lost[index] = removed
        for tool in offered:
            if self.worker.is_open(str(tool)):
                # Offered although the worker holds it open: only as this run's trial.
                assert self.worker.holds_trial(run.trials()[str(tool)])

    @rule(
        index=st.integers(0, RUNS - 1),
        tool=st.sampled_from(TOOLS),
        works=st.booleans(),
    )
    def agent_step(self, index: int, tool: str, works: bool) -> None:
        """What an agent does: take the offered tools, call one of them, record the outcome."""
        self.step(index)
        run = self.run(index)
        if not run.is_open(tool):
            if works:
                run.record_success(tool)
            else:
                run.record_failure(tool, retryable())

    @rule(index=st.integers(0, RUNS - 1))
    def replace_run(self, index: int) -> None:
        self.run(index).close()
        self.runs[index] = self.worker.start_run()
        self.lost[index] = set()

    @invariant()
    def at_most_one_run_holds_each_trial(self) -> None:
        for tool in self.TOOLS:
            holders = [
                run
                for run in self.runs
                if tool in run.trials() and self.worker.holds_trial(run.trials()[tool])
            ]
            assert len(holders) <= 1


TestRunsSharingAWorker = RunsSharingAWorker.TestCase
TestRunsSharingAWorker.settings = STATEFUL
