"""``POST /v1/traces``: GenAI spans become the same rows as ``/api/v1/events`` would write."""

from __future__ import annotations

from decimal import Decimal

import pytest

from runs.models import ModelCall, Run, ToolCall
from tests.otlp.conftest import PostSpans
from tests.otlp.spans import agent_span, model_span, tool_span, trace_id

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
@pytest.mark.parametrize("gzipped", [False, True])
def test_a_traced_run_becomes_a_run_with_its_model_and_tool_calls(
    post_spans: PostSpans, encoding: str, gzipped: bool
) -> None:
    trace = trace_id(0xABC)
    spans = [
        model_span(trace, start=1, end=2),
        tool_span(trace, start=2, end=3),
        tool_span(trace, start=3, end=4.5, error_type="TimeoutError"),
        agent_span(trace, start=0, end=10),
    ]
    response = post_spans(spans, encoding=encoding, gzipped=gzipped)
    assert response.status_code == 200, response.content
    assert response.partial == (0, "")
    run = Run.objects.get()
    assert run.run_id == f"otlp-{trace}"
    assert (run.source, run.agent, run.status, run.duration_ms) == (
        "otlp",
        "research",
        "completed",
        10_000,
    )
    assert run.worker.worker_id == "w-1"
    calls = list(
        ToolCall.objects.order_by("ts").values_list("tool", "outcome", "duration_ms", "error")
    )
    assert calls == [
        ("web_search", "success", 1000, ""),
        ("web_search", "retryable", 1500, "TimeoutError"),
    ]
    model = ModelCall.objects.get()
    assert (model.model, model.input_tokens, model.output_tokens) == ("gpt-4o", 1000, 100)
    assert model.cost_usd == Decimal("0.003500")  # gpt-4o from the genai-prices table
    assert run.cost_estimated is True
