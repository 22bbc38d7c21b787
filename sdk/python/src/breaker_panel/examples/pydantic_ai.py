"""Pydantic AI 2.x, offline: `python -m breaker_panel.examples.pydantic_ai`."""

from __future__ import annotations

from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from breaker_panel import ToolBreaker
from breaker_panel.integrations.pydantic_ai import breaker_capabilities

offered: list[list[str]] = []


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stands in for a model: searches three times (the last after it was removed), then answers."""
    offered.append([tool.name for tool in info.function_tools])
    if len(offered) <= 3:
        return ModelResponse(parts=[ToolCallPart("web_search", {"query": "acme revenue"})])
    return ModelResponse(parts=[TextPart("I could not search.")])


def main() -> list[str]:
    models.ALLOW_MODEL_REQUESTS = False  # nothing leaves this process
    offered.clear()
    breaker = ToolBreaker(threshold=2)  # run scope: this run is the run
    agent = Agent(FunctionModel(scripted_model), capabilities=breaker_capabilities(breaker))

    @agent.tool_plain
    def web_search(query: str) -> str:
        """Search the web."""
        raise ConnectionError("503 Service Unavailable from the search vendor")

    @agent.tool_plain
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return "42"

    result = agent.run_sync("What was Acme's revenue?")
    lines = [f"call {n + 1}: tools offered: {names}" for n, names in enumerate(offered)]
    lines += [f"notice: {breaker.notice()}", f"answer: {result.output}"]
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
