"""StepFilter: the per-step filter a run uses gives exactly what filter_tools() gives, whatever
the caller does to its tools array between steps."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from breaker_panel import ToolBreaker, ToolFailure
from breaker_panel.toolsets import StepFilter, filter_tools

NAMES = ["web_search", "fetch_url", "calculator", "lookup", "translate"]


def chat(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def test_a_repeated_step_gives_the_same_objects_in_a_new_list() -> None:
    tools = [chat(n) for n in NAMES]
    removed = frozenset({"fetch_url", "translate"})
    step = StepFilter().filter
    first, second = step(tools, removed), step(tools, removed)
    assert same(first, filter_tools(tools, removed)) and same(second, first)
    assert second is not first and second is not tools


def test_changes_to_the_array_between_steps_are_seen() -> None:
    tools = [chat(n) for n in NAMES]
    removed = frozenset({"fetch_url"})
    step = StepFilter().filter
    step(tools, removed)
    tools[0] = chat("fetch_url")  # replaced in place by a removed tool
    assert same(step(tools, removed), filter_tools(tools, removed))
    tools.append(chat("summarise"))
    assert same(step(tools, removed), filter_tools(tools, removed))
    del tools[2]
    assert same(step(tools, removed), filter_tools(tools, removed))
    assert same(step(list(tools), removed), filter_tools(tools, removed))


def test_a_new_removed_set_is_seen() -> None:
    tools = [chat(n) for n in NAMES]
    step = StepFilter().filter
    step(tools, frozenset({"fetch_url"}))
    assert same(step(tools, frozenset({"lookup"})), filter_tools(tools, frozenset({"lookup"})))


def test_groups_filtered_inside_are_not_cached_and_stay_right() -> None:
    tools: list[Any] = [{"function_declarations": [{"name": "web_search"}, {"name": "lookup"}]}]
    removed = frozenset({"web_search"})
    step = StepFilter().filter
    assert step(tools, removed) == [{"function_declarations": [{"name": "lookup"}]}]
    assert step(tools, removed) == filter_tools(tools, removed)


def test_a_breaker_filters_each_step_like_filter_tools() -> None:
    breaker = ToolBreaker(threshold=1)
    tools = [chat(n) for n in NAMES]
    assert same(breaker.available(tools), tools)
    breaker.record_failure("lookup", ToolFailure("503"))
    assert [t["function"]["name"] for t in breaker.available(tools)] == [
        "web_search",
        "fetch_url",
        "calculator",
        "translate",
    ]
    breaker.record_failure("web_search", ToolFailure("503"))
    assert [t["function"]["name"] for t in breaker.available(tools)] == [
        "fetch_url",
        "calculator",
        "translate",
    ]


@given(
    steps=st.lists(
        st.tuples(
            st.lists(st.sampled_from(NAMES), max_size=8),
            st.frozensets(st.sampled_from(NAMES)),
            st.booleans(),
        ),
        max_size=12,
    )
)
def test_any_sequence_of_steps_matches_filter_tools(
    steps: list[tuple[list[str], frozenset[str], bool]],
) -> None:
    step = StepFilter().filter
    pool = {name: chat(name) for name in NAMES}
    tools: list[Any] = []
    for names, removed, reuse in steps:
        if not reuse:
            tools = [pool[name] for name in names]  # same objects again, or a new array
        assert same(step(tools, removed), filter_tools(tools, removed))
