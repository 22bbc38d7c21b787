"""Three ways of taking a tool away from a model (contract names), and the result a run hands
back: the tools array to send, the `tool_choice` to send with it, and which way was applied.

- `remove`:   the tool leaves the tools array (what `available()` does).
- `restrict`: the array stays byte-identical, so a prompt cache keyed on it holds; the provider's
              allowed-tools mechanism forbids the tool (OpenAI Chat and Responses `allowed_tools`).
              Shapes without one (Anthropic, Gemini, MCP, plain) fall back to `refuse`, and the
              result says so.
- `refuse`:   the array stays; a call of the tool is answered at once with the notice and never
              reaches the vendor (outcome `blocked`): see `refusal()` on a run or breaker.

Why the defaults per shape are what they are: docs/adr/0202-ways-of-taking-a-tool-away.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from breaker_panel.toolsets import filter_tools, tool_names
from breaker_panel.vocabulary import Way

__all__ = [
    "DEFAULT_WAYS",
    "Shape",
    "Toolset",
    "Way",
    "detect_shape",
    "integration_way",
    "parse_way",
    "take_away",
]


class Shape(StrEnum):
    """The provider shape of a tools array, as `available()` reads it."""

    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"
    ANTHROPIC = "anthropic"
    GEMINI = "gemini"
    MCP = "mcp"
    PLAIN = "plain"  # plain {"name"} dicts, objects with .name, an empty or mixed array


# The way `toolset()` takes when the caller names none: the cheapest in the outage replay
# with prompt caching on (docs/benchmarks.md, "Ways of taking a tool away").
DEFAULT_WAYS: Mapping[Shape, Way] = {
    Shape.OPENAI_CHAT: Way.RESTRICT,
    Shape.OPENAI_RESPONSES: Way.RESTRICT,
    Shape.ANTHROPIC: Way.REFUSE,
    Shape.GEMINI: Way.REFUSE,
    Shape.MCP: Way.REFUSE,
    Shape.PLAIN: Way.REMOVE,
}
_ALLOWED_TOOLS_SHAPES = frozenset({Shape.OPENAI_CHAT, Shape.OPENAI_RESPONSES})


def parse_way(way: Way | str | None) -> Way | None:
    """A `Way` from its contract name; a clear ValueError for anything else."""
    if way is None or isinstance(way, Way):
        return way
    try:
        return Way(way)
    except ValueError:
        raise ValueError(f"way must be one of {[w.value for w in Way]}, got {way!r:.50}") from None


def integration_way(way: Way | str) -> Way:
    """`remove` or `refuse`, for an integration that cannot send the provider's allowed-tools
    list: `restrict` falls back to `refuse` (the array stays, so the cache does too)."""
    chosen = parse_way(way) or Way.REMOVE
    return Way.REFUSE if chosen is Way.RESTRICT else chosen


@dataclass(frozen=True, slots=True)
class Toolset:
    """What to send the model on this step, and how the run's lost tools were taken away.

    `tools`: the array to send (the caller's own objects; under `restrict` and `refuse` the same
    items in the same order, so its JSON is byte-identical step after step). `tool_choice`: send
    it as the request's `tool_choice` when it is not None (under `restrict` it is the provider's
    `allowed_tools` object; otherwise whatever the caller passed in). `hidden`: tools of this
    array the model may not call. `way`: the way applied; `requested` the one asked for, and
    `fallback` why they differ (None when they do not).
    """

    tools: list[Any]
    tool_choice: Any
    way: Way
    requested: Way
    shape: Shape
    hidden: frozenset[str]
    fallback: str | None = None

    def blocks(self, name: str) -> bool:
        """Must a call of `name` be refused (answered with the notice, never sent on)? True for
        a hidden tool whatever the way: a model may ask for a tool it was not given."""
        return name in self.hidden


def detect_shape(tools: Iterable[Any]) -> Shape:
    """The one provider shape of every named tool in `tools`; PLAIN if empty or mixed."""
    shapes = {_shape_of(tool) for tool in tools}
    shapes.discard(None)
    return shapes.pop() if len(shapes) == 1 else Shape.PLAIN  # type: ignore[return-value]


def _shape_of(tool: Any) -> Shape | None:
    if not isinstance(tool, Mapping):
        return Shape.PLAIN if isinstance(getattr(tool, "name", None), str) else None
    if isinstance(tool.get("function"), Mapping):
        return Shape.OPENAI_CHAT
    if "function_declarations" in tool or "functionDeclarations" in tool:
        return Shape.GEMINI
    kind = tool.get("type")
    if kind == "function" or kind == "namespace":
        return Shape.OPENAI_RESPONSES
    if isinstance(kind, str) and "name" not in tool:
        # A provider's built-in tool ({"type": "web_search"}): it says nothing about the shape.
        return None
    if "input_schema" in tool:
        return Shape.ANTHROPIC
    if "inputSchema" in tool:
        return Shape.MCP
    return Shape.PLAIN if isinstance(tool.get("name"), str) else None


def take_away(
    tools: Iterable[Any],
    removed: Collection[str],
    *,
    way: Way | str | None = None,
    tool_choice: Any = None,
    filter: Any = filter_tools,
    settled: Collection[str] = (),
) -> Toolset:
    """Take the `removed` tools out of reach of the model in `way`. `tool_choice` is the
    caller's own (None, "auto", "required", "none" or a forced tool); `filter` is the `remove`
    filter (a run passes its step-cached one).

    `way` None is the default policy: the tools in `settled` (those the run had already lost
    when it first asked: nothing of its prompt is cached yet) are removed, and any lost since
    are taken away in `DEFAULT_WAYS[shape]`, so the array stays the same from the run's first
    call to its last."""
    items = tools if isinstance(tools, list) else list(tools)
    shape = detect_shape(items)
    requested = parse_way(way)
    if requested is None:
        requested = DEFAULT_WAYS[shape]
        if settled and requested is not Way.REMOVE:
            hidden = frozenset(removed) & tool_names(items)
            rest = take_away(
                filter(items, settled), removed, way=requested, tool_choice=tool_choice
            )
            return dataclasses.replace(rest, hidden=hidden)
    hidden = frozenset(removed) & tool_names(items) if removed else frozenset()
    choice = _unforced(tool_choice, hidden)
    if requested is Way.REMOVE:
        return Toolset(filter(items, removed), choice, Way.REMOVE, requested, shape, hidden)
    if requested is Way.RESTRICT:
        why = _cannot_restrict(items, shape)
        if why is not None:
            return Toolset(list(items), choice, Way.REFUSE, requested, shape, hidden, why)
        if hidden:
            choice = _allowed_tools(items, hidden, shape, choice)
    return Toolset(list(items), choice, requested, requested, shape, hidden)


def _cannot_restrict(items: list[Any], shape: Shape) -> str | None:
    """Why `restrict` falls back to `refuse` for this array, or None if it does not."""
    if shape not in _ALLOWED_TOOLS_SHAPES:
        return f"{shape} tools have no allowed-tools list: calls of hidden tools are refused"
    for tool in items:
        if _allowed_entry(tool, frozenset(), shape) is None:
            return (
                f"a tool in this {shape} array cannot be named in allowed_tools "
                f"({tool!r:.80}): calls of hidden tools are refused"
            )
    return None


def _unforced(tool_choice: Any, hidden: frozenset[str]) -> Any:
    """The caller's tool_choice, or "auto" where it forces a tool that is hidden."""
    if not hidden or not isinstance(tool_choice, Mapping):
        return tool_choice
    function = tool_choice.get("function")
    name = function.get("name") if isinstance(function, Mapping) else tool_choice.get("name")
    return "auto" if name in hidden else tool_choice


def _allowed_tools(items: list[Any], hidden: frozenset[str], shape: Shape, choice: Any) -> Any:
    """OpenAI's `allowed_tools` tool_choice: every tool of the array but the hidden ones."""
    if choice == "none" or isinstance(choice, Mapping):
        return choice  # the caller allows no tool, or forces one that is not hidden
    entries = (_allowed_entry(tool, hidden, shape) for tool in items)
    allowed = [entry for entry in entries if entry is not None]
    if not allowed:
        return "none"  # every tool is hidden; an empty allowed list is not a valid request
    mode = "required" if choice == "required" else "auto"
    if shape is Shape.OPENAI_CHAT:
        return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": allowed}}
    return {"type": "allowed_tools", "mode": mode, "tools": allowed}


def _allowed_entry(tool: Any, hidden: frozenset[str], shape: Shape) -> dict[str, Any] | None:
    """The tool's `allowed_tools` entry; None if it is hidden or cannot be named there (a
    namespace group, a Chat tool that is not a function)."""
    if not isinstance(tool, Mapping):
        return None
    function = tool.get("function")
    name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
    kind = tool.get("type")
    if shape is Shape.OPENAI_CHAT:
        if kind != "function" or not isinstance(name, str) or name in hidden:
            return None
        return {"type": "function", "function": {"name": name}}
    if kind == "function" and isinstance(name, str):
        return None if name in hidden else {"type": "function", "name": name}
    if isinstance(kind, str) and kind not in ("function", "namespace") and "name" not in tool:
        # A built-in tool ({"type": "web_search"}, {"type": "mcp", "server_label": ...}).
        return {key: tool[key] for key in ("type", "server_label") if key in tool}
    return None
