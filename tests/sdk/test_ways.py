"""The three ways of taking a tool away on a ControlPlane run: the way chosen per plane, per run
or per call, the `blocked` event a refusal reports, and bad ways refused with a clear error.
The rules themselves are sdk/conformance/breaker/ways.json."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from breaker_panel import ControlPlane, PlaneConfig, ToolBreaker, ToolFailure
from breaker_panel.ways import DEFAULT_WAYS, Shape, Way, detect_shape

CHAT = [
    {"type": "function", "function": {"name": "web_search", "parameters": {}}},
    {"type": "function", "function": {"name": "read_page", "parameters": {}}},
]
ANTHROPIC = [{"name": "web_search", "input_schema": {}}, {"name": "read_page", "input_schema": {}}]


@pytest.fixture
def planes() -> Iterator[list[ControlPlane]]:
    made: list[ControlPlane] = []
    yield made
    for plane in made:
        plane.close(timeout=0)


def plane_of(planes: list[ControlPlane], **config: Any) -> ControlPlane:
    plane = ControlPlane(
        "http://127.0.0.1:9",
        token="t",
        worker_id="w1",
        config=PlaneConfig(scopes=("run",), **config),
        start=False,
    )
    planes.append(plane)
    return plane


def fail(run: Any, times: int = 5) -> None:
    for _ in range(times):
        run.record_failure("web_search", ToolFailure("503 from vendor", retryable=True))


def test_the_way_comes_from_the_call_then_the_run_then_the_plane_then_the_shape(
    planes: list[ControlPlane],
) -> None:
    plane = plane_of(planes, way="refuse")
    run = plane.start_run(agent="a")
    fail(run)
    assert run.toolset(CHAT).way is Way.REFUSE  # the plane's
    assert run.toolset(CHAT, way="remove").tools == CHAT[1:]  # the call's
    assert plane.start_run(agent="a", way="restrict").way is Way.RESTRICT  # the run's
    shaped = plane_of(planes).start_run(agent="a")
    fail(shaped)
    assert shaped.toolset(CHAT).way is DEFAULT_WAYS[Shape.OPENAI_CHAT]
    assert shaped.toolset(ANTHROPIC).way is DEFAULT_WAYS[Shape.ANTHROPIC]
    assert shaped.available(CHAT) == CHAT[1:]  # available() always removes


def test_a_refusal_reports_a_blocked_call_and_returns_the_notice(
    planes: list[ControlPlane],
) -> None:
    plane = plane_of(planes)
    run = plane.start_run(agent="a")
    assert run.refusal("web_search") is None  # nothing open: the call goes on
    fail(run)
    text = run.refusal("web_search")
    assert text == run.notice() and text is not None and "web_search" in text
    blocked = [e for e in plane.buffered() if e.get("outcome") == "blocked"]
    assert [(e["tool"], e["error"]) for e in blocked] == [
        ("web_search", "blocked by the run breaker")
    ]
    assert run.refusal("read_page") is None


def test_restrict_sends_the_same_bytes_every_step_and_tells_the_provider_what_is_allowed() -> None:
    breaker = ToolBreaker()
    before = breaker.toolset(CHAT, way="restrict")
    fail(breaker)
    after = breaker.toolset(CHAT, way="restrict")
    assert after.tools == before.tools == CHAT and after.tools[0] is CHAT[0]
    assert before.tool_choice is None  # nothing hidden: send your own tool_choice
    allowed = after.tool_choice["allowed_tools"]["tools"]
    assert allowed == [{"type": "function", "function": {"name": "read_page"}}]
    assert after.blocks("web_search") and not after.blocks("read_page")


def test_bad_ways_are_refused_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="way must be one of"):
        PlaneConfig(way="hide")
    with pytest.raises(ValueError, match="way must be one of"):
        ToolBreaker().toolset(CHAT, way="Remove")


@pytest.mark.parametrize(
    ("tools", "shape"),
    [
        (CHAT, Shape.OPENAI_CHAT),
        ([{"type": "function", "name": "t"}, {"type": "web_search"}], Shape.OPENAI_RESPONSES),
        (ANTHROPIC, Shape.ANTHROPIC),
        ([{"function_declarations": [{"name": "t"}]}], Shape.GEMINI),
        ([{"name": "t", "inputSchema": {}}], Shape.MCP),
        ([{"name": "t"}], Shape.PLAIN),
        ([], Shape.PLAIN),
        ([CHAT[0], ANTHROPIC[0]], Shape.PLAIN),  # mixed: no one provider's mechanism
    ],
)
def test_the_shape_of_a_tools_array(tools: list[Any], shape: Shape) -> None:
    assert detect_shape(tools) is shape
