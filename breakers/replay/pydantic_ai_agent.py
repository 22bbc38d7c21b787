"""The outage replay's research agent on Pydantic AI: ``simulate_outage --agent pydantic-ai``.

Same story, same scripted model (``ResearchScript``) and same control plane as the hand-written
agent of ``agent.py``, but every step goes through Pydantic AI's own plumbing: ``FunctionModel``
plays the model offline (no API key, no network), the tools are Pydantic AI tools, and the
breakers are the SDK's integration (``BreakerCapability``): it takes the tool out of each model
request, puts the notice in the instructions, refuses late calls and reports every outcome. The
model decides only from what the framework sends it: ``AgentInfo.function_tools``,
``AgentInfo.instructions`` and the last tool result in the message history.

One difference, forced by the framework: a Pydantic AI model call either calls a tool or ends the
run, so a wrap-up step before the last re-reads a page the model has (``read_page``, 0.5 s).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

from breaker_panel import ControlPlane
from breaker_panel.client import Run
from breaker_panel.integrations._runs import RunHandle
from breaker_panel.integrations.pydantic_ai import BreakerCapability
from breakers.replay.agent import AGENT, MODEL, RunRecord, Stage, what_it_met
from breakers.replay.caching import PromptCall
from breakers.replay.scenario import Scenario
from breakers.replay.script import READ, SEARCH, Action, ResearchScript

__all__ = ("PydanticAIPlayer",)

logger = logging.getLogger(__name__)


@dataclass
class _RunState:
    """One run's deps: the scripted model, what it did, and the SDK run the capability opened."""

    stage: Stage
    plane: ControlPlane
    script: ResearchScript
    record: RunRecord
    step: int = 0
    asked: Action | None = None  # the action of the last tool call the model made
    reached_vendor: set[str] = field(default_factory=set)  # tool call ids the vendor answered
    run: Run | None = None
    status: str = "completed"


class _ReplayCapability(BreakerCapability):
    """The integration's capability as the replay's modes need it.

    ``removes=False`` (modes none and fail-fast) keeps every tool in the request and sends no
    notice: fail-fast's breaker then only refuses calls (``before_tool_execute``), as a plain
    breaker does. ``for_run`` opens the SDK run with the story's step budget, and the run ends
    with the scripted model's own verdict (failed when it gave up, degraded unless it answered).
    """

    def __init__(
        self,
        plane: ControlPlane,
        price: Any,
        *,
        removes: bool,
        handle: RunHandle | None = None,
        state: _RunState | None = None,
    ) -> None:
        super().__init__(self._no_start, handle=handle)
        self.plane, self.price, self.removes, self.state = plane, price, removes, state

    @staticmethod
    def _no_start() -> RunHandle:  # for_run below opens the run itself
        raise NotImplementedError

    async def for_run(self, ctx: RunContext[Any]) -> _ReplayCapability:
        state: _RunState = ctx.deps
        # The run starts now for the table too, as in the database: the framework's set-up
        # before this hook takes real time, which a compressed replay multiplies.
        state.record.started_s = state.stage.clock.now()
        run = self.plane.start_run(agent=AGENT, step_budget=state.stage.scenario.step_budget)
        state.run = run
        handle = RunHandle(run.breakers, run, self.price)
        return _ReplayCapability(
            self.plane, self.price, removes=self.removes, handle=handle, state=state
        )

    def get_instructions(self) -> Any:
        return super().get_instructions() if self.removes else None

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        if not self.removes:
            return request_context
        return await super().before_model_request(ctx, request_context)

    def _finish(self, status: str) -> None:
        state = self.state
        if state is not None and state.run is not None:
            record = state.record
            failed = status == "failed" or state.status == "failed"
            state.run.finish(
                status="failed" if failed else "completed",
                degraded=record.degraded,
                steps=record.model_calls,
            )
        super()._finish(status)


def _price(scenario: Scenario) -> Any:
    def price(model: str, input_tokens: int, output_tokens: int) -> float:
        cost = (
            Decimal(input_tokens) * scenario.usd_per_million_input
            + Decimal(output_tokens) * scenario.usd_per_million_output
        ) / Decimal(1_000_000)
        return float(cost)

    return price


_ANSWERS = {
    Action.ANSWER: "Here is what I found.",
    Action.ANSWER_DEGRADED: "Web search is unavailable; this answer uses only what I had.",
    Action.GIVE_UP: "Sorry, I could not complete the research: web search kept failing.",
}


def _last_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    if messages and isinstance(messages[-1], ModelRequest):
        return [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    return []


async def _model(state: _RunState, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The scripted model behind ``FunctionModel``: one step of ``state``'s run."""
    stage, script, record = state.stage, state.script, state.record
    # What the previous step's tool call returned, as the framework hands it to the model.
    for returned in _last_returns(messages):
        if returned.tool_name == SEARCH:
            if returned.outcome == "success":
                script.search_succeeded()
            else:
                script.search_failed()
                if returned.tool_call_id not in state.reached_vendor:
                    record.refused += 1  # refused by the breaker before reaching the vendor
        elif (
            returned.tool_name == READ
            and returned.outcome == "success"
            and state.asked is Action.READ
        ):
            script.page_read()
    state.step += 1
    cost = stage.scenario.step_cost(state.step)
    # The prompt as a prompt cache sees it (``caching.py``): the tools array the framework
    # sends this step, in its order, and the notice when the run has taken a tool away.
    notice = stage.removes and state.run is not None and state.run.notice() is not None
    record.prompts.append(
        PromptCall(
            at_s=stage.clock.now(),
            run=record.started_s,
            tools=tuple(tool.name for tool in info.function_tools),
            history=state.step - 1,
            notice=notice,
            output_tokens=cost.output_tokens,
        )
    )
    stage.clock.sleep(cost.duration_s)
    record.model_calls += 1
    record.spend += cost.cost_usd
    offered = {tool.name for tool in info.function_tools}
    action = script.next_action(step=state.step, offered=offered, notice=info.instructions)
    usage = RequestUsage(input_tokens=cost.input_tokens, output_tokens=cost.output_tokens)
    state.asked = action
    call_id = f"call-{state.step}"
    if action is Action.SEARCH:
        part: Any = ToolCallPart(SEARCH, {"query": f"query {state.step}"}, tool_call_id=call_id)
    elif action in (Action.READ, Action.WRAP_UP):
        # A wrap-up step that is not the last re-reads a page it has (see the module docstring).
        url = f"https://example.org/{state.step}"
        part = ToolCallPart(READ, {"url": url}, tool_call_id=call_id)
    else:
        record.degraded = action is not Action.ANSWER
        if action is Action.GIVE_UP:
            state.status = "failed"
        part = TextPart(_ANSWERS[action])
    return ModelResponse(parts=[part], usage=usage)


async def _web_search(ctx: RunContext[_RunState], query: str) -> str:
    """Search the web."""
    state = ctx.deps
    stage, record = state.stage, state.record
    scenario = stage.scenario
    if ctx.tool_call_id is not None:
        state.reached_vendor.add(ctx.tool_call_id)
    started = stage.clock.now()
    record.search_calls += 1
    if scenario.vendor_is_down(started):
        record.search_calls_failing += 1
        failure, seconds = scenario.vendor_failure()
        stage.clock.sleep(seconds)
        record.http_attempts += failure.attempts
        raise failure
    stage.clock.sleep(scenario.healthy_search_s)
    record.http_attempts += 1
    if started >= scenario.outage_end_s:
        stage.recovery.saw_working(started)
    return f"results for {query}"


async def _read_page(ctx: RunContext[_RunState], url: str) -> str:
    """Read a web page."""
    ctx.deps.stage.clock.sleep(ctx.deps.stage.scenario.read_page_s)
    return f"the page at {url}"


class PydanticAIPlayer:
    """A ``RunPlayer`` (``agent.py``): one Pydantic AI agent per worker, serving its runs."""

    def __init__(self) -> None:
        self._agents: dict[int, Agent[_RunState, str]] = {}
        self._lock = threading.Lock()
        self.errors = 0  # runs the framework ended with an exception (recorded as failed)

    def _agent(self, stage: Stage, plane: ControlPlane) -> Agent[_RunState, str]:
        with self._lock:
            agent = self._agents.get(id(plane))
            if agent is None:
                capability = _ReplayCapability(plane, _price(stage.scenario), removes=stage.removes)
                agent = Agent(
                    None,
                    deps_type=_RunState,
                    instructions="You are a research agent. Answer with sources.",
                    tools=[Tool(_web_search, name=SEARCH), Tool(_read_page, name=READ)],
                    capabilities=[capability],
                    name=AGENT,
                )
                self._agents[id(plane)] = agent
            return agent

    def __call__(self, stage: Stage, plane: ControlPlane, rng: random.Random) -> RunRecord:
        scenario = stage.scenario
        agent = self._agent(stage, plane)
        record = RunRecord(started_s=stage.clock.now())
        script = ResearchScript(
            scenario.step_budget, scenario.rephrase_probability, rng, scenario.wrap_up_steps
        )
        state = _RunState(stage=stage, plane=plane, script=script, record=record)

        async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return await _model(state, messages, info)

        async def play() -> None:
            await agent.run(
                "Research the question and answer with sources.",
                model=FunctionModel(model, model_name=MODEL),
                deps=state,
                usage_limits=UsageLimits(request_limit=scenario.step_budget),
            )

        try:
            asyncio.run(play())
        except AgentRunError:  # e.g. the request limit; the table says how many
            logger.exception("a Pydantic AI run of the replay ended with an error")
            with self._lock:
                self.errors += 1
            record.degraded = True
            if state.run is not None:
                state.run.finish(status="failed", degraded=True, steps=record.model_calls)
        record.wrap_up_started_at = script.wrap_up_started_at
        record.ended_s = stage.clock.now()
        removed = state.run is not None and bool(state.run.removals()) and stage.removes
        record.met = what_it_met(record, removed=removed)
        return record
