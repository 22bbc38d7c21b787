"""LangChain v1, offline: `python -m breaker_panel.examples.langchain`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from breaker_panel import ToolBreaker
from breaker_panel.integrations.langchain import BreakerMiddleware


@tool
def web_search(query: str) -> str:
    """Search the web."""
    raise ConnectionError("503 Service Unavailable from the search vendor")


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return "42"


class ScriptedModel(BaseChatModel):
    """Stands in for a chat model: replies from a script, records the tools it was offered."""

    replies: Iterator[AIMessage]
    offered: list[list[str]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tool_names=[t.name for t in tools])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.offered.append(list(kwargs.get("tool_names", [])))
        return ChatResult(generations=[ChatGeneration(message=next(self.replies))])


def main() -> list[str]:
    search = [
        AIMessage(
            content="",
            tool_calls=[{"name": "web_search", "args": {"query": "acme revenue"}, "id": f"c{n}"}],
        )
        for n in range(3)
    ]
    model = ScriptedModel(
        replies=iter([*search, AIMessage(content="I could not search.")]), offered=[]
    )
    breaker = ToolBreaker(threshold=2)  # run scope: this invocation is the run
    agent = create_agent(
        model, tools=[web_search, calculator], middleware=[BreakerMiddleware(breaker)]
    )
    result = agent.invoke({"messages": [{"role": "user", "content": "What was Acme's revenue?"}]})
    lines = [f"call {n + 1}: tools offered: {names}" for n, names in enumerate(model.offered)]
    lines += [f"notice: {breaker.notice()}", f"answer: {result['messages'][-1].content}"]
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
