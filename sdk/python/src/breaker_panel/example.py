"""A small agent loop wired to a breaker. Run it with `python -m breaker_panel.example`.

No network and no real model: `ScriptedModel` stands in for the LLM, and `web_search` is a
vendor that is down (every call is exhausted after 5 HTTP attempts). The wiring is the three
lines marked (1), (2) and (3) below: filter the tools array, record each call's outcome, and
send the notice. After 5 consecutive failures web_search leaves the tools array the model is
given, so the model stops spending steps on it, falls back to the tools that remain, and says
in its answer what it could not do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from breaker_panel.core import ToolBreaker, ToolFailure
from breaker_panel.toolsets import tool_name

__all__ = ["STEP_BUDGET", "TOOLS", "ScriptedModel", "main", "run_agent"]

STEP_BUDGET = 20


def _chat_tool(name: str, description: str, parameter: str) -> dict[str, Any]:
    """One tool in the OpenAI Chat Completions shape."""
    schema = {"type": "object", "properties": {parameter: {"type": "string"}}}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


TOOLS: list[dict[str, Any]] = [
    _chat_tool("web_search", "Search the web.", "query"),
    _chat_tool("fetch_url", "Fetch one web page.", "url"),
    _chat_tool("calculator", "Evaluate arithmetic.", "expression"),
]


def web_search(query: str) -> str:
    # The vendor is down: the transport layer has already retried 5 times inside this call.
    raise ToolFailure("503 Service Unavailable from search vendor", retryable=True, attempts=5)


def fetch_url(url: str) -> str:
    return "Acme Q3 report: revenue 41.2M, up from 38.0M in Q2."


def calculator(expression: str) -> str:
    left, right = (float(part) for part in expression.split("/"))
    return f"{left / right:.4f}"


TOOL_FUNCTIONS: dict[str, Callable[[str], str]] = {
    "web_search": web_search,
    "fetch_url": fetch_url,
    "calculator": calculator,
}


@dataclass(frozen=True)
class Reply:
    """What the model answered: a tool call, or the final text."""

    tool: str | None = None
    argument: str = ""
    text: str = ""


class ScriptedModel:
    """Keeps re-phrasing its search while web_search is offered, as real models do, then
    falls back to the tools that remain and admits what it could not do."""

    def __init__(self) -> None:
        self.searches = 0
        self.results: dict[str, str] = {}

    def respond(self, tools: list[dict[str, Any]], notice: str | None) -> Reply:
        offered = {tool_name(tool) for tool in tools}
        if "web_search" in offered:
            self.searches += 1
            return Reply("web_search", f"Acme quarterly revenue (phrasing {self.searches})")
        if "fetch_url" not in self.results:
            return Reply("fetch_url", "https://acme.example/investors/q3")
        if "calculator" not in self.results:
            return Reply("calculator", "41.2/38.0")
        growth = (float(self.results["calculator"]) - 1) * 100
        admission = " web_search was unavailable, so I could not check other sources."
        return Reply(
            text=f"Acme's Q3 revenue grew {growth:.1f}% over Q2.{admission if notice else ''}"
        )

    def observe(self, tool: str, result: str) -> None:
        self.results[tool] = result


def run_agent(model: ScriptedModel, print_: Callable[[str], None] = print) -> str:
    """The agent loop: at most STEP_BUDGET steps, one tool call or the answer per step."""
    breaker = ToolBreaker(step_budget=STEP_BUDGET)
    last_notice: str | None = None
    for step in range(1, STEP_BUDGET + 1):
        tools = breaker.available(TOOLS)  # (1) the broken tool is not offered at all
        notice = breaker.notice()  # (3) None until something is removed
        print_(f"step {step:2}: tools offered: {', '.join(map(str, map(tool_name, tools)))}")
        if notice is not None and notice != last_notice:
            print_("         notice sent to the model:\n" + _indent(notice))
        elif notice is not None:
            print_("         notice: resent unchanged")
        last_notice = notice
        reply = model.respond(tools, notice)
        if reply.tool is None:
            print_(f"         answer: {reply.text}")
            return reply.text
        print_(f"         calls {reply.tool}({reply.argument!r})")
        model.observe(reply.tool, _call(breaker, reply.tool, reply.argument, print_))
    return "step budget exhausted"


def _call(breaker: ToolBreaker, name: str, argument: str, print_: Callable[[str], None]) -> str:
    try:
        result = TOOL_FUNCTIONS[name](argument)
    except ToolFailure as failure:
        breaker.record_failure(name, failure)  # (2) one exhausted call = one failure
        print_(f"         -> failed: {failure.message} ({failure.attempts} attempts)")
        return f"error: {failure.message}"
    breaker.record_success(name)  # (2)
    print_(f"         -> {result}")
    return result


def _indent(text: str) -> str:
    return "\n".join("           | " + line for line in text.splitlines())


def main() -> int:
    run_agent(ScriptedModel())
    print(f"TOOLS still holds {len(TOOLS)} tools: available() never changes the caller's list.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
