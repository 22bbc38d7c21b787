"""The property ``/api/v1/events`` has, for spans: however the spans of some runs are split into
exports, reordered and resent, the rows written are the same."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakers.models import FleetTransition, Incident, Tool
from runs.models import (
    FleetBacklog,
    IngestedEvent,
    ModelCall,
    ReportedTransition,
    Run,
    ToolCall,
    Worker,
)
from tests.otlp.spans import FakeSpan, agent_span, model_span, tool_span, trace_id
from tests.otlp.support import PostSpans

pytestmark = pytest.mark.django_db

A, B = trace_id(0xA), trace_id(0xB)
W2 = {"service.instance.id": "w-2"}
SPANS: list[FakeSpan] = [
    agent_span(A, name="research", start=0, end=60),
    agent_span(A, name="helper", start=10, end=20),  # a nested agent: the outer one names the run
    model_span(A, start=1, end=2),
    model_span(A, start=11, end=12, extra={"gen_ai.usage.cost": 0.05}),
    tool_span(A, start=3, end=4, error_type="TimeoutError"),
    tool_span(A, start=5, end=6, error_type="TimeoutError"),
    tool_span(A, "fetch", start=13, end=14),
    tool_span(A, start=30, end=31, exception=("ToolRetryError", "bad query"), error_type="x"),
    tool_span(B, start=2, end=3, resource=W2),
    tool_span(B, start=4, end=9, error_type="ConnectionError", resource=W2),
    model_span(B, model="house-model", start=1, end=2, resource=W2),
]


def rows() -> dict[str, Any]:
    return {
        "runs": sorted(
            Run.objects.values_list(
                "run_id", "agent", "worker__worker_id", "status", "started_at", "finished_at",
                "duration_ms", "model_calls", "model_spend_usd", "input_tokens", "output_tokens",
                "tool_calls", "tool_attempts", "tool_failures", "source", "cost_estimated",
            )
        ),
        "tools": sorted(
            ToolCall.objects.values_list(
                "event_id", "run__run_id", "worker__worker_id", "ts", "tool", "outcome",
                "attempts", "duration_ms", "error",
            )
        ),
        "models": sorted(
            ModelCall.objects.values_list(
                "event_id", "run__run_id", "ts", "model", "input_tokens", "output_tokens",
                "cost_usd", "duration_ms",
            )
        ),
    }  # fmt: skip


def reset(redis_client: redis.Redis) -> None:
    """Empty what an export writes (ingest commits its own transactions, so no rollback)."""
    for model in (ToolCall, ModelCall, ReportedTransition, IngestedEvent, FleetBacklog):
        model.objects.all().delete()
    Run.objects.all().delete()
    Worker.objects.all().delete()
    Incident.objects.all().delete()
    FleetTransition.objects.all().delete()
    Tool.objects.all().delete()
    redis_client.flushdb()


def apply(
    post_spans: PostSpans, redis_client: redis.Redis, exports: list[tuple[list[FakeSpan], str]]
) -> dict[str, Any]:
    reset(redis_client)
    for spans, encoding in exports:
        response = post_spans(spans, encoding=encoding)
        assert response.status_code == 200, response.content
        assert response.partial == (0, "")
    return rows()


@st.composite
def deliveries(draw: st.DrawFn) -> list[tuple[list[FakeSpan], str]]:
    order = draw(st.permutations(range(len(SPANS))))
    resent = draw(st.lists(st.sampled_from(range(len(SPANS))), max_size=4))
    sequence = [SPANS[i] for i in [*order, *resent]]
    cuts = sorted(draw(st.sets(st.integers(1, len(sequence) - 1), max_size=6)))
    bounds = [0, *cuts, len(sequence)]
    return [
        (sequence[start:end], draw(st.sampled_from(["protobuf", "json"])))
        for start, end in itertools.pairwise(bounds)
    ]


@pytest.fixture
def reference(post_spans: PostSpans, redis_client: redis.Redis) -> dict[str, Any]:
    return apply(post_spans, redis_client, [(SPANS, "protobuf")])


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(exports=deliveries())
def test_any_split_order_and_resend_of_the_spans_gives_the_same_rows(
    post_spans: PostSpans,
    redis_client: redis.Redis,
    reference: dict[str, Any],
    exports: list[tuple[list[FakeSpan], str]],
) -> None:
    assert apply(post_spans, redis_client, exports) == reference


def test_the_reference_delivery_writes_what_the_spans_say(reference: dict[str, Any]) -> None:
    runs = {run[0]: run for run in reference["runs"]}
    run_a, run_b = runs[f"otlp-{A}"], runs[f"otlp-{B}"]
    assert run_a[1:4] == ("research", "w-1", "completed")
    assert run_a[6] == 60_000
    assert run_a[11:14] == (4, 4, 3)  # 3 failures: two retryable, one semantic
    assert run_b[1:4] == ("unknown_service", "w-2", "running")
    outcomes = sorted(tool[5] for tool in reference["tools"])
    assert outcomes == ["retryable", "retryable", "retryable", "semantic", "success", "success"]
