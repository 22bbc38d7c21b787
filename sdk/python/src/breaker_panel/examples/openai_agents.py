"""OpenAI Agents SDK, offline: `python -m breaker_panel.examples.openai_agents`."""

from __future__ import annotations

from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from breaker_panel import ToolBreaker
from breaker_panel.integrations.openai_agents import protect


@function_tool
def web_search(query: str) -> str:
    """Search the web."""
    raise ConnectionError("503 Service Unavailable from the search vendor")


@function_tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return "42"


def main() -> list[str]:
    search = [
        function_call("web_search", {"query": "acme revenue"}, call_id=f"c{n}") for n in range(3)
    ]
    model = ScriptedModel(
        [[call] for call in search] + [[assistant_message("I could not search.")]]
    )
    breaker = ToolBreaker(threshold=2)  # run scope: this invocation is the run
    agent = protect(Agent(name="research", model=model, tools=[web_search, calculator]), breaker)
    result = Runner.run_sync(agent, "What was Acme's revenue?")
    lines = [
        f"call {n + 1}: tools offered: {[t.name for t in call.tools]}"
        for n, call in enumerate(model.calls)
    ]
    lines += [f"notice: {breaker.notice()}", f"answer: {result.final_output}"]
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
