"""The outage replay's agent: one run of the scripted research model through the SDK's ``Run``,
on the replay's clock, and what each run did (``RunRecord``)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from breaker_panel import ControlPlane
from breaker_panel.toolsets import tool_names
from breaker_panel.ways import Way
from breakers.replay.caching import PromptCall
from breakers.replay.clock import SimClock
from breakers.replay.scenario import Scenario
from breakers.replay.script import READ, SEARCH, Action, ResearchScript

__all__ = (
    "AGENT",
    "AGENTS",
    "MODEL",
    "Recovery",
    "RunPlayer",
    "RunRecord",
    "Stage",
    "play_hand_written",
    "what_it_met",
)

AGENT = "research"
MODEL = "scripted-research-model"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": SEARCH,
            "description": "Search the web.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": READ,
            "description": "Read a web page.",
            "parameters": {"type": "object", "properties": {"url": {"type": "string"}}},
        },
    },
]
# The same two tools as an Anthropic-shaped model is sent them (``--provider anthropic``).
ANTHROPIC_TOOLS: list[dict[str, Any]] = [
    {
        "name": tool["function"]["name"],
        "description": tool["function"]["description"],
        "input_schema": tool["function"]["parameters"],
    }
    for tool in TOOLS
]
TOOLS_BY_PROVIDER = {"openai": TOOLS, "anthropic": ANTHROPIC_TOOLS}
# The replay's name for the SDK's default way (none named): see breaker_panel.ways.take_away.
DEFAULT_WAY = "default"
# Who plays the runs: the agent written by hand below, or the same scripted model driven through
# Pydantic AI and the SDK's integration (``pydantic_ai_agent``).
AGENTS = ("hand-written", "pydantic-ai")


@dataclass
class RunRecord:
    """What one run did, in simulated seconds."""

    started_s: float
    ended_s: float = 0.0
    spend: Decimal = Decimal(0)
    model_calls: int = 0
    search_calls: int = 0  # calls that reached the vendor
    search_calls_failing: int = 0  # ... while it was down
    empty_answers: int = 0  # ... of which answered 200 with nothing (Scenario.failure="empty")
    http_attempts: int = 0
    refused: int = 0  # refused by a fail-fast breaker
    degraded: bool = False
    wrap_up_started_at: int | None = None  # the step at which the model stopped asking for search
    met: str = "healthy tool"  # healthy tool | failed through | refused fast | tool removed
    hidden_calls: int = 0  # calls of web_search after the notice said it was gone (refused)
    prompts: list[PromptCall] = field(default_factory=list)  # each model call, for the caches

    @property
    def duration_s(self) -> float:
        return self.ended_s - self.started_s


@dataclass
class Recovery:
    """The first time, after the vendor came back, that a run could use web_search again."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    first_working_s: float | None = None

    def saw_working(self, at_s: float) -> None:
        with self.lock:
            if self.first_working_s is None or at_s < self.first_working_s:
                self.first_working_s = at_s


@dataclass(frozen=True)
class Stage:
    """What every run of one mode plays against: the story, the mode, the replay's clock."""

    scenario: Scenario
    mode: str
    clock: SimClock
    recovery: Recovery
    # How the breaker takes the tool away (None: ``available()``, the ``remove`` of old
    # replays) and the shape of the model the runs talk to (its tools array's shape).
    way: str | None = None
    provider: str = "openai"

    @property
    def removes(self) -> bool:
        """Whether the mode's breaker takes the tool out of the tools array (and sends a notice)."""
        return self.mode not in ("none", "fail-fast")


# Plays one run on one worker's control plane with the run's own random numbers; blocks until
# the run has finished.
RunPlayer = Callable[[Stage, ControlPlane, random.Random], RunRecord]


def play_hand_written(stage: Stage, plane: ControlPlane, rng: random.Random) -> RunRecord:
    """The hand-written agent: the SDK's ``Run`` called directly, step by step."""
    return _play_run(
        scenario=stage.scenario,
        mode=stage.mode,
        plane=plane,
        clock=stage.clock,
        rng=rng,
        recovery=stage.recovery,
        way=stage.way,
        provider=stage.provider,
    )


def _play_run(
    *,
    scenario: Scenario,
    mode: str,
    plane: ControlPlane,
    clock: SimClock,
    rng: random.Random,
    recovery: Recovery,
    way: str | None = None,
    provider: str = "openai",
) -> RunRecord:
    tools = TOOLS_BY_PROVIDER[provider]
    record = RunRecord(started_s=clock.now())
    run = plane.start_run(agent=AGENT, step_budget=scenario.step_budget)
    script = ResearchScript(
        scenario.step_budget,
        scenario.rephrase_probability,
        rng,
        scenario.wrap_up_steps,
        ignores_notice_probability=scenario.ignores_notice_probability,
    )
    removes = mode not in ("none", "fail-fast")
    status = "completed"
    for step in range(1, scenario.step_budget + 1):
        # What the model is sent: with removal, the SDK's tools array and notice; without it,
        # every tool and no notice (a plain breaker only refuses calls).
        sent, offered = _what_is_sent(way, run, tools, removes)
        notice = run.notice() if removes else None
        cost = scenario.step_cost(step)
        record.prompts.append(
            PromptCall(
                at_s=clock.now(),
                run=record.started_s,
                tools=tuple(_names(sent)),
                history=step - 1,
                notice=notice is not None,
                output_tokens=cost.output_tokens,
            )
        )
        clock.sleep(cost.duration_s)
        run.record_model_call(
            model=MODEL,
            input_tokens=cost.input_tokens,
            output_tokens=cost.output_tokens,
            cost_usd=float(cost.cost_usd),
            duration_ms=round(cost.duration_s * 1000),
        )
        record.model_calls += 1
        record.spend += cost.cost_usd
        action = script.next_action(step=step, offered=offered, notice=notice)
        if action is Action.SEARCH:
            if removes and way is not None and run.refusal(SEARCH) is not None:
                # Still in its tools array (``refuse``): answered at once with the notice.
                record.hidden_calls += 1
            elif mode == "fail-fast" and SEARCH not in _names(run.available(tools)):
                # The plain breaker refuses in microseconds; the model reads it as a failure.
                run.record_blocked(SEARCH)
                record.refused += 1
                script.search_failed()
            else:
                _search(scenario, run, clock, script, record, recovery)
        elif action is Action.READ:
            clock.sleep(scenario.read_page_s)
            run.record_success(READ, duration_ms=round(scenario.read_page_s * 1000))
            script.page_read()
        elif action is not Action.WRAP_UP:
            record.degraded = action is not Action.ANSWER
            if action is Action.GIVE_UP:
                status = "failed"
            break
    record.wrap_up_started_at = script.wrap_up_started_at
    record.ended_s = clock.now()
    record.met = what_it_met(record, removed=bool(run.removals()) and removes)
    run.finish(status=status, degraded=record.degraded, steps=record.model_calls)
    return record


def _what_is_sent(
    way: str | None, run: Any, tools: list[dict[str, Any]], removes: bool
) -> tuple[list[dict[str, Any]], set[str]]:
    """The tools array this step sends, and the tools the model can call from it (under
    ``restrict`` the provider's allowed-tools list forbids the hidden ones)."""
    if not removes:
        return tools, set(_names(tools))
    if way is None:
        sent = run.available(tools)
        return sent, set(_names(sent))
    # "default": the SDK's own choice (no way named; breaker_panel.ways.take_away).
    toolset = run.toolset(tools, way=None if way == DEFAULT_WAY else way)
    callable_ = set(_names(toolset.tools))
    if toolset.way is Way.RESTRICT:
        callable_ -= toolset.hidden
    return toolset.tools, callable_


def _names(tools: list[dict[str, Any]]) -> list[str]:
    """The tools' names in the array's order (any shape the replay sends)."""
    return [name for tool in tools for name in sorted(tool_names([tool]))]


def _search(
    scenario: Scenario,
    run: Any,
    clock: SimClock,
    script: ResearchScript,
    record: RunRecord,
    recovery: Recovery,
) -> None:
    started = clock.now()
    record.search_calls += 1
    if scenario.vendor_is_down(started) and scenario.failure == "empty":
        _empty_answer(scenario, run, clock, script, record)
        return
    if scenario.vendor_is_down(started):
        record.search_calls_failing += 1
        failure, seconds = scenario.vendor_failure()
        clock.sleep(seconds)
        record.http_attempts += failure.attempts
        run.record_failure(SEARCH, failure, duration_ms=round(seconds * 1000))
        script.search_failed()
        return
    clock.sleep(scenario.healthy_search_s)
    record.http_attempts += 1
    run.record_success(SEARCH, duration_ms=round(scenario.healthy_search_s * 1000))
    script.search_succeeded()
    if started >= scenario.outage_end_s:
        recovery.saw_working(started)


EMPTY_ANSWER: dict[str, Any] = {"results": [], "total": 0}


def _empty_answer(
    scenario: Scenario, run: Any, clock: SimClock, script: ResearchScript, record: RunRecord
) -> None:
    """The vendor answers 200 OK, fast, with no results: nothing raises. With result checks on
    the call is degraded; counting only exceptions it is a success. The model re-plans either
    way: it has no answer."""
    record.search_calls_failing += 1
    record.empty_answers += 1
    clock.sleep(scenario.healthy_search_s)
    record.http_attempts += 1
    duration_ms = round(scenario.healthy_search_s * 1000)
    if scenario.exception_only:
        run.record_success(SEARCH, duration_ms=duration_ms)
    else:
        query = {"q": f"research question, attempt {record.search_calls}"}
        run.record_result(SEARCH, EMPTY_ANSWER, arguments=query, duration_ms=duration_ms)
    script.search_failed()


def what_it_met(record: RunRecord, *, removed: bool) -> str:
    if removed:
        return "tool removed"
    if record.refused:
        return "refused fast"
    if record.http_attempts > record.search_calls:  # some call failed after its retries
        return "failed through"
    if record.empty_answers:  # answered, with nothing in it
        return "failed through"
    return "healthy tool"
