"""Pydantic AI 2.x integration, with the real package and `FunctionModel`, model requests
forbidden (`ALLOW_MODEL_REQUESTS = False`): offline, no API key. The trap of issue 12: a removed
tool the model keeps calling must be refused without using the retry budget, so three such
calls (more than the default budget of one retry) still end in an answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from breaker_panel import ControlPlane, ToolBreaker, WorkerBreakers
from breaker_panel.integrations.pydantic_ai import breaker_capabilities

pytestmark = pytest.mark.usefixtures("no_model_requests")


class Vendor:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.calls = 0


USAGE = RequestUsage(input_tokens=90, output_tokens=4)


class Script:
    """A FunctionModel function: replies in order, records tools and instructions offered."""

    def __init__(self, *replies: ModelResponse) -> None:
        self.replies = iter(replies)
        self.calls: list[tuple[list[str], str]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append(([t.name for t in info.function_tools], info.instructions or ""))
        return next(self.replies)


def search(n: int) -> ModelResponse:
    return ModelResponse(
        parts=[ToolCallPart("web_search", {"query": f"q{n}"}, tool_call_id=f"c{n}")], usage=USAGE
    )


def answer(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)], usage=USAGE)


def make_agent(model: FunctionModel, vendor: Vendor, capabilities: list[Any]) -> Agent[None, str]:
    agent = Agent(model, instructions="Be brief.", capabilities=capabilities)

    @agent.tool_plain
    def web_search(query: str) -> str:
        """Search the web."""
        vendor.calls += 1
        if vendor.error is not None:
            raise vendor.error
        return f"results for {query}"

    @agent.tool_plain
    def calculator(expression: str) -> str:
        """Evaluate arithmetic."""
        return "4"

    return agent


def returns(result: Any) -> list[ToolReturnPart]:
    return [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]


def test_an_open_tool_leaves_the_request_and_late_calls_are_refused_without_the_retry_budget() -> (
    None
):
    script = Script(search(1), search(2), search(3), search(4), search(5), answer("done"))
    vendor = Vendor(ConnectionError("503 from vendor"))
    breaker = ToolBreaker(threshold=2)
    agent = make_agent(FunctionModel(script), vendor, breaker_capabilities(breaker))

    result = agent.run_sync("find it")

    assert result.output == "done"  # three refused calls did not end the run
    assert vendor.calls == 2
    assert [names for names, _ in script.calls] == [["web_search", "calculator"]] * 2 + [
        ["calculator"]
    ] * 4
    notice = breaker.notice() or ""
    assert "web_search: it keeps failing (last error: ConnectionError: 503 from vendor)" in notice
    assert notice in script.calls[2][1] and "Be brief." in script.calls[2][1]
    assert notice not in script.calls[1][1]
    assert notice in str(returns(result)[-1].content)


def test_bad_arguments_are_semantic_and_never_open_the_tool() -> None:
    script = Script(search(1), search(2), search(3), answer("no answer"))
    vendor = Vendor(ValueError("query must be under 256 characters"))
    breaker = ToolBreaker(threshold=2)
    make_agent(FunctionModel(script), vendor, breaker_capabilities(breaker)).run_sync("find it")
    assert vendor.calls == 3 and not breaker.is_open("web_search")
    assert "web_search: 3 calls got no usable answer" in script.calls[3][1]


def plane() -> ControlPlane:
    return ControlPlane("http://127.0.0.1:9", token="t", worker_id="w1", start=False)


def test_a_control_plane_run_per_run_with_usage_and_finish() -> None:
    control = plane()
    script = Script(search(1), answer("done"))
    agent = make_agent(
        FunctionModel(script),
        Vendor(TimeoutError("slow")),
        breaker_capabilities(control, agent="research"),
    )
    agent.run_sync("find it")
    events = control.buffered()
    assert [(e["type"], e.get("outcome")) for e in events] == [
        ("run.started", None),
        ("model.call", None),
        ("tool.call", "retryable"),
        ("model.call", None),
        ("run.finished", None),
    ]
    assert (events[1]["input_tokens"], events[1]["output_tokens"]) == (90, 4)
    assert events[-1]["status"] == "completed"
    control.close(timeout=0)


def test_one_agent_serves_concurrent_runs_as_separate_runs() -> None:
    control = plane()

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
        return answer("done") if done else search(len(messages))

    agent = make_agent(FunctionModel(reply), Vendor(), breaker_capabilities(control))

    async def main() -> None:
        await asyncio.gather(*(agent.run(f"q{n}") for n in range(8)))

    asyncio.run(main())
    events = control.buffered()
    started = {e["run_id"] for e in events if e["type"] == "run.started"}
    finished = {e["run_id"] for e in events if e["type"] == "run.finished"}
    calls = sorted(e["run_id"] for e in events if e["type"] == "tool.call")
    assert len(started) == 8 and finished == started and calls == sorted(started)
    control.close(timeout=0)


def test_worker_breakers_take_the_tool_from_later_runs() -> None:
    worker = WorkerBreakers(threshold=2)
    vendor = Vendor(ConnectionError("down"))
    script = Script(search(1), answer("a"), search(2), answer("b"), answer("c"))
    agent = make_agent(FunctionModel(script), vendor, breaker_capabilities(worker))
    for question in ("first", "second", "third"):
        agent.run_sync(question)
    assert worker.is_open("web_search") and vendor.calls == 2
    assert script.calls[-1][0] == ["calculator"]


def test_a_tool_that_answers_with_an_error_body_is_degraded_and_removed() -> None:
    """Issue 25: `{"error": ...}` returned, not raised; the result checks count it."""
    script = Script(search(1), search(2), answer("the search is down"))
    breaker = ToolBreaker(threshold=2)
    agent = Agent(
        FunctionModel(script), instructions="Be brief.", capabilities=breaker_capabilities(breaker)
    )

    @agent.tool_plain
    def web_search(query: str) -> dict[str, str]:
        """Search the web."""
        return {"error": "rate limited"}

    result = agent.run_sync("find it")
    assert [p.content for p in returns(result)] == [{"error": "rate limited"}] * 2  # unchanged
    assert breaker.is_open("web_search")
    assert script.calls[2][0] == []
    assert "answers with an error instead of results (rate limited)" in script.calls[2][1]


def test_refuse_keeps_every_tool_in_the_request_and_refuses_the_open_ones() -> None:
    script = Script(search(1), search(2), search(3), search(4), answer("done"))
    vendor = Vendor(ConnectionError("503 from vendor"))
    breaker = ToolBreaker(threshold=2)
    capabilities = breaker_capabilities(breaker, way="refuse")
    agent = make_agent(FunctionModel(script), vendor, capabilities)

    result = agent.run_sync("find it")

    assert result.output == "done"
    assert vendor.calls == 2  # calls 3 and 4 were refused, not run, and used no retry budget
    assert [tools for tools, _ in script.calls] == [["web_search", "calculator"]] * 5
    notice = breaker.notice() or ""
    assert notice in script.calls[2][1]
    assert [part.content for part in returns(result)][-2:] == [notice, notice]
    assert breaker_capabilities(breaker, way="restrict")[0].way == "refuse"  # type: ignore[attr-defined]
