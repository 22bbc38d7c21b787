"""available() in the caller's own tool shape: every shape, never mutating, unknowns untouched."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given

from breaker_panel import ToolBreaker, ToolFailure
from breaker_panel.toolsets import filter_tools, tool_name
from tests.sdk.support import chat_tools

REMOVED = frozenset({"web_search"})


def open_breaker(*names: str) -> ToolBreaker:
    breaker = ToolBreaker(threshold=1)
    for name in names:
        breaker.record_failure(name, ToolFailure("503", retryable=True))
    return breaker


def names(tools: list[Any]) -> list[str | None]:
    return [tool_name(tool) for tool in tools]


@dataclass
class NamedTool:
    name: str


# -- one case per shape: (tools, what remains after removing web_search) -----------------------

SHAPES: dict[str, tuple[list[Any], list[Any]]] = {
    "openai_chat": (chat_tools("web_search", "fetch_url"), chat_tools("fetch_url")),
    "openai_responses": (
        [
            {"type": "function", "name": "web_search", "parameters": {}},
            {"type": "function", "name": "fetch_url", "parameters": {}},
        ],
        [{"type": "function", "name": "fetch_url", "parameters": {}}],
    ),
    "anthropic": (
        [
            {"name": "web_search", "input_schema": {"type": "object"}},
            {"name": "fetch_url", "input_schema": {"type": "object"}},
        ],
        [{"name": "fetch_url", "input_schema": {"type": "object"}}],
    ),
    "anthropic_server_tool": (
        [{"type": "web_search_20250305", "name": "web_search"}, {"name": "fetch_url"}],
        [{"name": "fetch_url"}],
    ),
    "mcp_tools_list": (
        [
            {"name": "web_search", "inputSchema": {"type": "object"}},
            {"name": "fetch_url", "inputSchema": {"type": "object"}},
        ],
        [{"name": "fetch_url", "inputSchema": {"type": "object"}}],
    ),
    "plain_name": ([{"name": "web_search"}, {"name": "fetch_url"}], [{"name": "fetch_url"}]),
    "gemini": (
        [{"function_declarations": [{"name": "web_search"}, {"name": "fetch_url"}]}],
        [{"function_declarations": [{"name": "fetch_url"}]}],
    ),
    "gemini_camel_case": (
        [{"functionDeclarations": [{"name": "web_search"}, {"name": "fetch_url"}]}],
        [{"functionDeclarations": [{"name": "fetch_url"}]}],
    ),
    "responses_namespace": (
        [
            {
                "type": "namespace",
                "name": "research",
                "tools": [
                    {"type": "function", "name": "web_search"},
                    {"type": "function", "name": "fetch_url"},
                ],
            }
        ],
        [
            {
                "type": "namespace",
                "name": "research",
                "tools": [{"type": "function", "name": "fetch_url"}],
            }
        ],
    ),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_available_removes_the_open_tool_in_each_shape(shape: str) -> None:
    tools, expected = SHAPES[shape]
    assert open_breaker("web_search").available(tools) == expected


@pytest.mark.parametrize("shape", SHAPES)
def test_available_never_mutates_the_input(shape: str) -> None:
    tools, _ = SHAPES[shape]
    before = copy.deepcopy(tools)
    result = open_breaker("web_search").available(tools)
    assert tools == before
    assert result is not tools


@pytest.mark.parametrize("shape", SHAPES)
def test_available_with_nothing_open_returns_an_equal_new_list(shape: str) -> None:
    tools, _ = SHAPES[shape]
    result = ToolBreaker().available(tools)
    assert result == tools
    assert result is not tools


def test_objects_with_a_name_attribute_are_filtered() -> None:
    tools = [NamedTool("web_search"), NamedTool("fetch_url")]
    assert open_breaker("web_search").available(tools) == [NamedTool("fetch_url")]


def test_unknown_shapes_pass_through_untouched() -> None:
    odd: list[Any] = [
        "web_search",
        42,
        None,
        {"kind": "web_search"},
        {"name": ["web_search"]},
        {"type": "function", "function": {"name": None}},
        {"type": "function", "function": "web_search"},
        object,
    ]
    result = open_breaker("web_search").available(odd)
    assert result == odd
    assert all(a is b for a, b in zip(result, odd, strict=True))


def test_tuples_and_generators_are_accepted() -> None:
    breaker = open_breaker("web_search")
    tools = tuple(chat_tools("web_search", "fetch_url"))
    assert names(breaker.available(tools)) == ["fetch_url"]
    assert names(breaker.available(iter(tools))) == ["fetch_url"]


def test_an_emptied_gemini_group_is_dropped() -> None:
    tools = [
        {"function_declarations": [{"name": "web_search"}]},
        {"function_declarations": [{"name": "fetch_url"}]},
    ]
    assert open_breaker("web_search").available(tools) == [tools[1]]


def test_a_gemini_group_keeps_its_other_tools_when_its_declarations_empty() -> None:
    tools = [{"function_declarations": [{"name": "web_search"}], "google_search": {}}]
    assert open_breaker("web_search").available(tools) == [{"google_search": {}}]


def test_an_emptied_namespace_is_dropped() -> None:
    tools = [
        {
            "type": "namespace",
            "name": "search",
            "tools": [{"type": "function", "name": "web_search"}],
        },
        {"type": "function", "name": "fetch_url"},
    ]
    assert open_breaker("web_search").available(tools) == [tools[1]]


def test_a_namespace_is_not_removed_by_its_own_name() -> None:
    tools = [{"type": "namespace", "name": "web_search", "tools": [{"name": "fetch_url"}]}]
    assert open_breaker("web_search").available(tools) == tools


def test_a_group_that_was_already_empty_passes_through() -> None:
    tools = [{"function_declarations": []}, {"type": "namespace", "name": "n", "tools": []}]
    assert open_breaker("web_search").available(tools) == tools


def test_an_untouched_group_is_the_same_object() -> None:
    group = {"function_declarations": [{"name": "fetch_url"}]}
    [result] = open_breaker("web_search").available([group])
    assert result is group


def test_a_filtered_group_is_a_copy() -> None:
    group = {"function_declarations": [{"name": "web_search"}, {"name": "fetch_url"}]}
    [result] = open_breaker("web_search").available([group])
    assert result is not group
    assert len(group["function_declarations"]) == 2


def test_several_open_tools_across_shapes_in_one_array() -> None:
    tools: list[Any] = [
        *chat_tools("web_search"),
        {"name": "fetch_url", "input_schema": {}},
        {"function_declarations": [{"name": "calculator"}, {"name": "web_search"}]},
        {"name": "keep"},
    ]
    result = open_breaker("web_search", "fetch_url").available(tools)
    assert result == [{"function_declarations": [{"name": "calculator"}]}, {"name": "keep"}]


def test_tool_name_reads_every_shape() -> None:
    assert tool_name(chat_tools("a")[0]) == "a"
    assert tool_name({"type": "function", "name": "b"}) == "b"
    assert tool_name({"name": "c", "inputSchema": {}}) == "c"
    assert tool_name(NamedTool("d")) == "d"
    assert tool_name({"function_declarations": [{"name": "e"}]}) is None
    assert tool_name({"type": "namespace", "name": "ns", "tools": []}) is None
    assert tool_name(7) is None


def test_filter_tools_with_no_removals_copies() -> None:
    tools = chat_tools("a", "b")
    result = filter_tools(tools, frozenset())
    assert result == tools
    assert result is not tools


def test_filter_tools_accepts_any_collection_of_names() -> None:
    assert names(filter_tools(chat_tools("a", "b"), ["a"])) == ["b"]
    assert names(filter_tools(chat_tools("a", "b"), {"b": object()})) == ["a"]


def test_removed_set_is_not_consulted_for_nested_names_it_lacks() -> None:
    tools = [{"type": "namespace", "name": "n", "tools": chat_tools("a")}]
    assert filter_tools(tools, REMOVED) == tools


# -- the fast path and the general path agree ---------------------------------------------------

NAMES = ["web_search", "fetch_url", "calculator"]
names_st = st.sampled_from(NAMES)
leaf_tools = st.one_of(
    names_st.map(lambda n: chat_tools(n)[0]),
    names_st.map(lambda n: {"type": "function", "name": n}),
    names_st.map(lambda n: {"name": n, "input_schema": {}}),
    names_st.map(lambda n: MappingProxyType({"type": "function", "function": {"name": n}})),
    names_st.map(NamedTool),
    st.sampled_from([None, 3, "web_search", {"name": 5}, {"function": "x"}, {"name": ["a"]}]),
)
group_tools = st.one_of(
    st.lists(names_st.map(lambda n: {"name": n}), max_size=3).map(
        lambda inner: {"function_declarations": inner}
    ),
    st.lists(leaf_tools, max_size=3).map(
        lambda inner: {"type": "namespace", "name": "web_search", "tools": inner}
    ),
)
tool_lists = st.lists(st.one_of(leaf_tools, group_tools), max_size=8)


def reference_filter(tools: list[Any], removed: frozenset[str]) -> list[Any]:
    """The rules written plainly: a named tool goes if removed, a group keeps what remains."""
    kept = []
    for tool in tools:
        name = tool_name(tool)
        if name is not None:
            if name not in removed:
                kept.append(tool)
            continue
        key = next(
            (k for k in ("tools", "function_declarations") if isinstance(tool, dict) and k in tool),
            None,
        )
        if key is None:
            kept.append(tool)
            continue
        inner = reference_filter(tool[key], removed)
        if len(inner) == len(tool[key]):
            kept.append(tool)
        elif inner:
            kept.append({**tool, key: inner})
    return kept


@given(tools=tool_lists, removed=st.frozensets(names_st))
def test_filter_matches_the_plain_rules_for_any_mix_of_shapes(
    tools: list[Any], removed: frozenset[str]
) -> None:
    before = repr(tools)  # deepcopy cannot copy a mappingproxy; its repr shows any change
    assert filter_tools(tools, removed) == reference_filter(tools, removed)
    assert repr(tools) == before


@given(names=st.lists(names_st, max_size=20), removed=st.frozensets(names_st))
def test_the_all_chat_fast_path_matches_the_plain_rules(
    names: list[str], removed: frozenset[str]
) -> None:
    tools = chat_tools(*names)
    assert filter_tools(tools, removed) == reference_filter(tools, removed)


def test_a_read_only_mapping_is_read_like_a_dict() -> None:
    tool = MappingProxyType({"type": "function", "function": {"name": "web_search"}})
    assert tool_name(tool) == "web_search"
    assert filter_tools([tool, {"name": "x"}], REMOVED) == [{"name": "x"}]
