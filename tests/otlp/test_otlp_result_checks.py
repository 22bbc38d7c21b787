"""OTLP tool spans whose recorded result is empty or error-shaped become `degraded` calls, and
count towards the fleet breaker like the SDK's own degraded results."""

from __future__ import annotations

import pytest
from django.test import override_settings

from runs.models import ToolCall
from tests.otlp.spans import agent_span, tool_span, trace_id
from tests.otlp.support import PostSpans

pytestmark = pytest.mark.django_db


def outcomes() -> list[tuple[str, str, str]]:
    return list(ToolCall.objects.order_by("ts").values_list("tool", "outcome", "error"))


def test_an_empty_or_error_shaped_result_attribute_is_degraded(post_spans: PostSpans) -> None:
    trace = trace_id(0xD1)
    spans = [
        tool_span(trace, start=1, end=2, extra={"gen_ai.tool.call.result": '{"results": []}'}),
        tool_span(
            trace,
            start=2,
            end=3,
            extra={"gen_ai.tool.call.result": '{"error": "rate limited", "results": null}'},
        ),
        tool_span(trace, start=3, end=4, extra={"output.value": ""}),
        tool_span(trace, start=4, end=5, extra={"gen_ai.tool.call.result": "3 results: a, b, c"}),
        tool_span(trace, start=5, end=6),  # no result recorded: nothing to check
        agent_span(trace, start=0, end=10),
    ]
    assert post_spans(spans).status_code == 200
    assert outcomes() == [
        ("web_search", "degraded", "Degraded: returns empty results for every query"),
        (
            "web_search",
            "degraded",
            "Degraded: answers with an error instead of results (rate limited)",
        ),
        ("web_search", "degraded", "Degraded: returns empty results for every query"),
        ("web_search", "success", ""),
        ("web_search", "success", ""),
    ]


@override_settings(OTLP_HEALTHY_EMPTY_TOOLS=["flights"])
def test_a_tool_declared_healthy_when_empty_is_not_checked(post_spans: PostSpans) -> None:
    trace = trace_id(0xD2)
    spans = [
        tool_span(trace, "flights", start=1, end=2, extra={"gen_ai.tool.call.result": "[]"}),
        agent_span(trace, start=0, end=10),
    ]
    assert post_spans(spans).status_code == 200
    assert outcomes() == [("flights", "success", "")]


@override_settings(OTLP_RESULT_CHECKS=False)
def test_result_checks_can_be_turned_off(post_spans: PostSpans) -> None:
    trace = trace_id(0xD3)
    spans = [
        tool_span(trace, start=1, end=2, extra={"gen_ai.tool.call.result": ""}),
        agent_span(trace, start=0, end=10),
    ]
    assert post_spans(spans).status_code == 200
    assert outcomes() == [("web_search", "success", "")]


def test_a_result_too_big_to_check_is_a_success(post_spans: PostSpans) -> None:
    trace = trace_id(0xD4)
    huge = "[" * 50_000 + "]" * 50_000  # deeply nested JSON: could not check
    spans = [
        tool_span(trace, start=1, end=2, extra={"gen_ai.tool.call.result": huge}),
        agent_span(trace, start=0, end=10),
    ]
    assert post_spans(spans).status_code == 200
    assert outcomes() == [("web_search", "success", "")]
