"""Benchmark: what each framework integration adds per call over the bare framework.

Run from the repository root:

    .venv/bin/python bench/bench_integrations.py [--repeat 15] [--invocations 20]

For each framework the same agent is invoked bare, protected by a `ToolBreaker`, and protected
by a `ControlPlane` (no server, no sender thread: its events stay in the buffer, emptied between
rounds). A stateless scripted model (no network) asks for `CALLS` tool calls, one per model
call, then answers, so an invocation is CALLS + 1 model calls and CALLS tool calls, all
succeeding. Rounds are interleaved (every variant once per round). Times are this process's
CPU time (`time.process_time()`), not wall time. Reported: the median and best time per
invocation; the overhead per tool call (with the model call that offered it) as
the median over rounds of (protected - bare) / CALLS in microseconds, and from the best rounds
(less disturbed by a loaded machine); and the median per-round ratio to bare.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from breaker_panel import ControlPlane, ToolBreaker

CALLS = 3
QUESTION = "What was Acme's revenue?"


def plane() -> ControlPlane:
    return ControlPlane("http://127.0.0.1:9", token="bench", worker_id="bench", start=False)


# -- OpenAI Agents SDK -------------------------------------------------------------------------


def openai_agents() -> dict[str, Callable[[], object]]:
    from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool
    from agents.testing import assistant_message, function_call

    from breaker_panel.integrations.openai_agents import protect

    class Scripted(Model):
        async def get_response(
            self, system_instructions: Any, input: Any, *a: Any, **k: Any
        ) -> Any:
            done = (
                0
                if isinstance(input, str)
                else sum(1 for item in input if item.get("type") == "function_call_output")
            )
            output = (
                [assistant_message("done")]
                if done >= CALLS
                else [function_call("lookup", {"q": "x"}, call_id=f"c{done}")]
            )
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def lookup(q: str) -> str:
        """Look something up."""
        return "found"

    bare = Agent(name="bench", model=Scripted(), tools=[lookup])
    run_scope = protect(bare, ToolBreaker())
    control = plane()
    with_plane = protect(bare, control)
    return {
        "bare": lambda: Runner.run_sync(bare, QUESTION),
        "ToolBreaker": lambda: Runner.run_sync(run_scope, QUESTION),
        "ControlPlane": lambda: (
            Runner.run_sync(with_plane, QUESTION),
            control.sender.buffer.clear(),
        ),
    }


# -- LangChain v1 ----------------------------------------------------------------------------


def langchain() -> dict[str, Callable[[], object]]:
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    from breaker_panel.integrations.langchain import BreakerMiddleware

    class Scripted(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            done = sum(1 for m in messages if isinstance(m, ToolMessage))
            message = (
                AIMessage(content="done")
                if done >= CALLS
                else AIMessage(
                    content="",
                    tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": f"c{done}"}],
                )
            )
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return "found"

    control = plane()
    agents = {
        "bare": create_agent(Scripted(), tools=[lookup]),
        "ToolBreaker": create_agent(
            Scripted(), tools=[lookup], middleware=[BreakerMiddleware(ToolBreaker())]
        ),
        "ControlPlane": create_agent(
            Scripted(), tools=[lookup], middleware=[BreakerMiddleware(control)]
        ),
    }
    question = {"messages": [{"role": "user", "content": QUESTION}]}

    def invoke(name: str) -> Callable[[], object]:
        return lambda: (agents[name].invoke(question), control.sender.buffer.clear())

    return {name: invoke(name) for name in agents}


# -- Pydantic AI 2.x -------------------------------------------------------------------------


def pydantic_ai() -> dict[str, Callable[[], object]]:
    from pydantic_ai import Agent, models
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from breaker_panel.integrations.pydantic_ai import breaker_capabilities

    models.ALLOW_MODEL_REQUESTS = False

    def scripted(messages: Any, info: Any) -> ModelResponse:
        done = sum(1 for m in messages for p in m.parts if isinstance(p, ToolReturnPart))
        if done >= CALLS:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("lookup", {"q": "x"}, tool_call_id=f"c{done}")])

    def lookup(q: str) -> str:
        """Look something up."""
        return "found"

    control = plane()
    agents = {
        "bare": Agent(FunctionModel(scripted), tools=[lookup]),
        "ToolBreaker": Agent(
            FunctionModel(scripted),
            tools=[lookup],
            capabilities=breaker_capabilities(ToolBreaker()),
        ),
        "ControlPlane": Agent(
            FunctionModel(scripted), tools=[lookup], capabilities=breaker_capabilities(control)
        ),
    }

    def invoke(name: str) -> Callable[[], object]:
        return lambda: (agents[name].run_sync(QUESTION), control.sender.buffer.clear())

    return {name: invoke(name) for name in agents}


FRAMEWORKS = {"openai-agents": openai_agents, "langchain": langchain, "pydantic-ai": pydantic_ai}


def measure(
    variants: dict[str, Callable[[], object]], rounds: int, invocations: int
) -> dict[str, list[float]]:
    for invoke in variants.values():
        invoke()  # warm up imports and caches
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, invoke in variants.items():
            # CPU time of this process: on a machine shared with other busy processes, wall time
            # mostly measures their load; the work an integration adds is CPU work.
            started = time.process_time()
            for _ in range(invocations):
                invoke()
            seconds[name].append((time.process_time() - started) / invocations)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="interleaved rounds")
    parser.add_argument("--invocations", type=int, default=20, help="invocations per round")
    args = parser.parse_args()
    print(
        f"{CALLS} tool calls per invocation, "
        f"{args.repeat} rounds x {args.invocations} invocations\n"
    )
    print(
        f"{'framework':14} {'variant':13} {'median ms':>9} {'best ms':>8} "
        f"{'µs/call added':>13} {'(best)':>7} {'ratio':>6}"
    )
    for framework, build in FRAMEWORKS.items():
        seconds = measure(build(), args.repeat, args.invocations)
        bare = seconds["bare"]
        for name, times in seconds.items():
            added = statistics.median(
                (t - b) / CALLS * 1e6 for t, b in zip(times, bare, strict=True)
            )
            ratio = statistics.median(t / b for t, b in zip(times, bare, strict=True))
            best = (min(times) - min(bare)) / CALLS * 1e6
            shown = ("", "") if name == "bare" else (f"{added:.0f}", f"{best:.0f}")
            print(
                f"{framework:14} {name:13} {statistics.median(times) * 1e3:9.2f} "
                f"{min(times) * 1e3:8.2f} {shown[0]:>13} {shown[1]:>7} {ratio:6.2f}"
            )
    return 0


if __name__ == "__main__":
    asyncio.set_event_loop(None)
    raise SystemExit(main())
