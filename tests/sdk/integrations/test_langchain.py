"""LangChain v1 integration, with the real `create_agent` and a scripted chat model: offline,
no API key. The trap of issue 12: a tool taken out of `ModelRequest.tools` is still run by
`ToolNode` if the model calls it, so the middleware must refuse it itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from breaker_panel import ControlPlane, ToolBreaker, WorkerBreakers
from breaker_panel.integrations.langchain import BreakerMiddleware


class ScriptedChat(BaseChatModel):
    """Answers from `script(messages)`; records the tool names and system text of each call."""

    script: Callable[[list[BaseMessage]], AIMessage]
    calls: list[tuple[list[str], str]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tool_names=[t.name for t in tools])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        system = next((str(m.content) for m in messages if isinstance(m, SystemMessage)), "")
        self.calls.append((list(kwargs.get("tool_names", [])), system))
        return ChatResult(generations=[ChatGeneration(message=self.script(messages))])


def call(name: str, n: int, **args: Any) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": name, "args": args or {"query": "q"}, "id": f"c{n}"}],
        usage_metadata={"input_tokens": 100, "output_tokens": 5, "total_tokens": 105},
    )


def answer(text: str) -> AIMessage:
    return AIMessage(
        content=text, usage_metadata={"input_tokens": 50, "output_tokens": 3, "total_tokens": 53}
    )


def scripted(*replies: AIMessage) -> ScriptedChat:
    queue: Iterator[AIMessage] = iter(replies)
    return ScriptedChat(script=lambda messages: next(queue), calls=[])


class Vendor:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.calls = 0


def tools_for(vendor: Vendor) -> list[Any]:
    @tool
    def web_search(query: str) -> str:
        """Search the web."""
        vendor.calls += 1
        if vendor.error is not None:
            raise vendor.error
        return f"results for {query}"

    @tool
    def calculator(expression: str) -> str:
        """Evaluate arithmetic."""
        return "4"

    return [web_search, calculator]


def tool_messages(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def test_an_open_tool_leaves_the_request_and_a_late_call_is_refused_not_run() -> None:
    model = scripted(
        call("web_search", 1), call("web_search", 2), call("web_search", 3), answer("done")
    )
    vendor = Vendor(ConnectionError("503 from vendor"))
    breaker = ToolBreaker(threshold=2)
    agent = create_agent(
        model,
        tools=tools_for(vendor),
        system_prompt="Be brief.",
        middleware=[BreakerMiddleware(breaker)],
    )

    result = agent.invoke({"messages": [{"role": "user", "content": "find it"}]})

    assert result["messages"][-1].content == "done"
    assert vendor.calls == 2  # ToolNode never ran the third call
    assert [names for names, _ in model.calls] == [
        ["web_search", "calculator"],
        ["web_search", "calculator"],
        ["calculator"],
        ["calculator"],
    ]
    notice = breaker.notice() or ""
    assert "web_search: it keeps failing (last error: ConnectionError: 503 from vendor)" in notice
    assert model.calls[2][1] == f"Be brief.\n\n{notice}"
    refused = tool_messages(result)[-1]
    assert (refused.content, refused.status) == (notice, "error")


def test_bad_arguments_are_semantic_and_the_model_sees_the_error() -> None:
    model = scripted(*(call("web_search", n) for n in range(4)), answer("no answer"))
    vendor = Vendor(ValueError("query must be under 256 characters"))
    breaker = ToolBreaker(threshold=2)
    agent = create_agent(model, tools=tools_for(vendor), middleware=[BreakerMiddleware(breaker)])
    result = agent.invoke({"messages": [{"role": "user", "content": "find it"}]})
    assert vendor.calls == 4 and not breaker.is_open("web_search")
    assert tool_messages(result)[0].content == "ValueError: query must be under 256 characters"
    assert "web_search: 3 calls got no usable answer" in model.calls[3][1]


def test_arguments_that_fail_the_tools_schema_are_semantic() -> None:
    model = scripted(*(call("web_search", n, wrong=1) for n in range(3)), answer("gave up"))
    breaker = ToolBreaker(threshold=1)
    agent = create_agent(model, tools=tools_for(Vendor()), middleware=[BreakerMiddleware(breaker)])
    agent.invoke({"messages": [{"role": "user", "content": "find it"}]})
    assert not breaker.is_open("web_search")
    assert breaker.semantic_strikes()[0].count == 3


def plane() -> ControlPlane:
    return ControlPlane("http://127.0.0.1:9", token="t", worker_id="w1", start=False)


def test_a_control_plane_run_per_invocation_with_usage_and_finish() -> None:
    control = plane()
    model = scripted(call("web_search", 1), answer("done"))
    agent = create_agent(
        model,
        tools=tools_for(Vendor(TimeoutError("slow"))),
        middleware=[BreakerMiddleware(control, agent="research")],
    )
    agent.invoke({"messages": [{"role": "user", "content": "find it"}]})
    events = control.buffered()
    assert [(e["type"], e.get("outcome")) for e in events] == [
        ("run.started", None),
        ("model.call", None),
        ("tool.call", "retryable"),
        ("model.call", None),
        ("run.finished", None),
    ]
    assert events[0]["agent"] == "research"
    assert (events[1]["input_tokens"], events[1]["output_tokens"]) == (100, 5)
    control.close(timeout=0)


def test_one_agent_serves_concurrent_invocations_as_separate_runs() -> None:
    control = plane()

    def script(messages: list[BaseMessage]) -> AIMessage:
        done = any(isinstance(m, ToolMessage) for m in messages)
        return answer("done") if done else call("web_search", len(messages))

    model = ScriptedChat(script=script, calls=[])
    agent = create_agent(model, tools=tools_for(Vendor()), middleware=[BreakerMiddleware(control)])

    async def main() -> None:
        await asyncio.gather(
            *(agent.ainvoke({"messages": [{"role": "user", "content": f"q{n}"}]}) for n in range(8))
        )

    asyncio.run(main())
    events = control.buffered()
    started = {e["run_id"] for e in events if e["type"] == "run.started"}
    finished = {e["run_id"] for e in events if e["type"] == "run.finished"}
    calls = sorted(e["run_id"] for e in events if e["type"] == "tool.call")
    assert len(started) == 8 and finished == started and calls == sorted(started)
    control.close(timeout=0)


def test_worker_breakers_take_the_tool_from_later_invocations() -> None:
    worker = WorkerBreakers(threshold=2)
    vendor = Vendor(ConnectionError("down"))
    model = scripted(
        call("web_search", 1), answer("a"), call("web_search", 2), answer("b"), answer("c")
    )
    agent = create_agent(model, tools=tools_for(vendor), middleware=[BreakerMiddleware(worker)])
    for question in ("first", "second", "third"):
        agent.invoke({"messages": [{"role": "user", "content": question}]})
    assert worker.is_open("web_search") and vendor.calls == 2
    assert model.calls[-1][0] == ["calculator"]


def test_a_tool_that_answers_with_nothing_is_degraded_and_leaves_the_request() -> None:
    """Issue 25: no exception, an empty answer each time; the result checks count it."""

    @tool
    def web_search(query: str) -> str:
        """Search the web."""
        return '{"results": [], "total": 0}'

    model = scripted(call("web_search", 1), call("web_search", 2), answer("nothing found"))
    breaker = ToolBreaker(threshold=2)
    agent = create_agent(model, tools=[web_search], middleware=[BreakerMiddleware(breaker)])
    result = agent.invoke({"messages": [{"role": "user", "content": "find it"}]})

    assert [m.content for m in tool_messages(result)] == ['{"results": [], "total": 0}'] * 2
    assert breaker.is_open("web_search")
    assert model.calls[2][0] == []
    assert "web_search: it returns empty results for every query" in model.calls[2][1]


def test_refuse_keeps_tools_and_system_message_and_sends_the_notice_last() -> None:
    replies = iter([call("web_search", 1), call("web_search", 2), call("web_search", 3)])
    last_messages: list[BaseMessage] = []

    def script(messages: list[BaseMessage]) -> AIMessage:
        last_messages.append(messages[-1])
        return next(replies, answer("done"))

    model = ScriptedChat(script=script, calls=[])
    vendor = Vendor(ConnectionError("503 from vendor"))
    breaker = ToolBreaker(threshold=2)
    middleware = BreakerMiddleware(breaker, way="refuse")
    agent = create_agent(
        model, tools=tools_for(vendor), system_prompt="Be brief.", middleware=[middleware]
    )

    result = agent.invoke({"messages": [{"role": "user", "content": "find it"}]})

    assert result["messages"][-1].content == "done"
    assert vendor.calls == 2  # the third call was refused, not run
    # The tools and the system message, the cached prefix, never change.
    assert model.calls == [(["web_search", "calculator"], "Be brief.")] * 4
    notice = breaker.notice() or ""
    assert last_messages[2].content == notice and last_messages[1].content != notice
    refused = tool_messages(result)[-1]
    assert (refused.content, refused.status) == (notice, "error")
    assert BreakerMiddleware(breaker, way="restrict").way == "refuse"
