"""``POST /v1/traces``: GenAI spans become the same rows as ``/api/v1/events`` would write."""

from __future__ import annotations

import gzip
from decimal import Decimal

import pytest
from django.test import Client
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from runs.models import AgentToken, ModelCall, Run, ToolCall
from scripts.testing.processes import free_port
from tests.otlp.spans import CLIENT, SERVER, agent_span, export, model_span, tool_span, trace_id
from tests.otlp.support import TRACES_URL, PostSpans

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


def test_protobufs_own_json_parser_would_misread_hex_ids_and_ours_does_not(
    post_spans: PostSpans,
) -> None:
    # The trap: hex is also valid base64, so json_format.Parse reads a 32-hex-digit trace id
    # as 24 bytes without an error. The receiver converts ids first.
    from google.protobuf import json_format
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    trace = "5b8efff798038103d269b633813fc60c"
    misread = json_format.ParseDict({"traceId": trace}, Span())
    assert len(misread.trace_id) == 24

    response = post_spans([tool_span(trace)], encoding="json")
    assert response.status_code == 200
    assert Run.objects.get().run_id == f"otlp-{trace}"
    assert ToolCall.objects.get().event_id.startswith(f"otlp-{trace}-")


def test_a_tool_span_that_comes_before_its_agent_span_lands_and_the_run_is_completed_later(
    post_spans: PostSpans,
) -> None:
    trace = trace_id(7)
    # Exporters send a span when it ends, so the agent span (which ends last) comes last.
    post_spans([tool_span(trace, start=5, end=6, error_type="TimeoutError")])
    run = Run.objects.get()
    assert (run.status, run.agent, run.tool_failures) == ("running", "unknown_service", 1)
    post_spans([agent_span(trace, name="planner", start=0, end=30)])
    run.refresh_from_db()
    assert (run.status, run.agent, run.duration_ms) == ("completed", "planner", 30_000)
    assert run.started_at.timestamp() == pytest.approx(1_796_000_000)


def test_resending_an_export_changes_nothing(post_spans: PostSpans) -> None:
    trace = trace_id(8)
    spans = [model_span(trace), tool_span(trace, error_type="TimeoutError"), agent_span(trace)]
    for _ in range(3):
        assert post_spans(spans).status_code == 200
    run = Run.objects.get()
    assert (run.tool_calls, run.tool_failures, run.model_calls) == (1, 1, 1)
    assert ToolCall.objects.count() == 1 and ModelCall.objects.count() == 1


def test_spans_it_does_not_know_are_ignored_not_refused(post_spans: PostSpans) -> None:
    trace = trace_id(9)
    http = tool_span(trace, extra={"http.request.method": "GET", "new.attribute": [1, 2]})
    http.attributes.pop("gen_ai.operation.name")
    http.name = "GET /search"
    odd = tool_span(trace, extra={"gen_ai.operation.name": "create_agent", "x.y": True})
    response = post_spans([http, odd])
    assert response.status_code == 200
    assert response.partial == (0, "")
    assert not Run.objects.exists()


def test_unknown_attributes_on_a_known_span_are_ignored(post_spans: PostSpans) -> None:
    span = tool_span(trace_id(10), extra={"vendor.thing": "x", "gen_ai.future.field": 3.5})
    span.kind = 5  # CONSUMER: an unusual kind still maps by its attributes
    assert post_spans([span]).partial == (0, "")
    assert ToolCall.objects.get().outcome == "success"


@pytest.mark.parametrize(
    ("error_type", "exception", "extra", "outcome"),
    [
        ("TimeoutError", None, {}, "retryable"),
        (None, ("pydantic_ai.exceptions.ToolRetryError", "bad query"), {}, "semantic"),
        ("ValidationError", None, {}, "semantic"),
        ("HTTPError", None, {"http.response.status_code": 404}, "semantic"),
        ("HTTPError", None, {"http.response.status_code": 503}, "retryable"),
        ("ConnectionError", ("ConnectionError", "refused"), {}, "retryable"),
    ],
)
def test_tool_errors_are_classified_with_the_sdk_rules(
    post_spans: PostSpans,
    error_type: str | None,
    exception: tuple[str, str] | None,
    extra: dict[str, object],
    outcome: str,
) -> None:
    span = tool_span(trace_id(11), error_type=error_type, extra=extra, exception=exception)
    span.error = True
    post_spans([span])
    call = ToolCall.objects.get()
    assert call.outcome == outcome
    if exception:
        assert call.error == f"{exception[0]}: {exception[1]}"


def test_the_classification_is_configurable(post_spans: PostSpans, settings: object) -> None:
    settings.OTLP_SEMANTIC_ERROR_TYPES = ["QuotaExceeded"]  # type: ignore[attr-defined]
    post_spans([tool_span(trace_id(12), error_type="vendor.QuotaExceeded")])
    assert ToolCall.objects.get().outcome == "semantic"


def test_mcp_tools_call_spans_are_tool_calls_on_the_client_side_only(post_spans: PostSpans) -> None:
    trace = trace_id(13)
    mcp = {"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool"}
    client_side = tool_span(trace, "read_file", error_type="tool_error", extra=mcp, kind=CLIENT)
    client_side.name = "tools/call read_file"
    server_side = tool_span(trace, "read_file", error_type="tool_error", extra=mcp, kind=SERVER)
    assert post_spans([client_side, server_side]).partial == (0, "")
    call = ToolCall.objects.get()
    assert (call.tool, call.outcome, call.error) == ("read_file", "retryable", "tool_error")


@pytest.mark.parametrize(
    ("extra", "cost", "estimated"),
    [
        ({"gen_ai.usage.cost": 0.25}, "0.250000", False),
        ({"operation.cost": 0.5}, "0.500000", False),
        ({"llm.cost.total": 0.125}, "0.125000", False),
        ({"llm.cost.prompt": 0.1, "llm.cost.completion": 0.02}, "0.120000", False),
        ({}, "0.003500", True),
        ({"gen_ai.request.model": "house-model-7"}, "0.000000", True),
    ],
)
def test_a_reported_cost_is_used_and_otherwise_estimated_from_the_price_table(
    post_spans: PostSpans, extra: dict[str, object], cost: str, estimated: bool
) -> None:
    post_spans([model_span(trace_id(14), extra=extra)])
    assert ModelCall.objects.get().cost_usd == Decimal(cost)
    run = Run.objects.get()
    assert run.cost_estimated is estimated
    assert run.model_spend_usd == Decimal(cost)


def test_the_worker_is_the_instance_id_or_host_and_pid(post_spans: PostSpans) -> None:
    first = tool_span(trace_id(15), resource={"service.instance.id": "inst-9"})
    second = tool_span(trace_id(16), resource={"host.name": "box", "process.pid": 4242})
    post_spans([first, second])
    workers = set(Run.objects.values_list("worker__worker_id", flat=True))
    assert workers == {"inst-9", "box:4242"}


def test_a_span_with_a_bad_id_is_rejected_in_partial_success_and_the_rest_is_kept(
    post_spans: PostSpans,
) -> None:
    good = tool_span(trace_id(17))
    bad = tool_span("00" * 16)
    response = post_spans([good, bad], encoding="json")
    assert response.status_code == 200
    rejected, message = response.partial
    assert rejected == 1
    assert "traceId" in message
    assert ToolCall.objects.count() == 1


def test_a_span_the_ingest_rejects_is_counted_in_partial_success(post_spans: PostSpans) -> None:
    bad_name = tool_span(trace_id(18), "web\x00search")
    good = tool_span(trace_id(18), "fetch")
    rejected, message = post_spans([bad_name, good]).partial
    assert rejected == 1
    assert "tool" in message and "control characters" in message
    assert list(ToolCall.objects.values_list("tool", flat=True)) == ["fetch"]


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_a_body_that_is_not_an_export_gets_400_with_a_status_message(
    client: Client, agent_token: str, encoding: str
) -> None:
    content_type = "application/json" if encoding == "json" else "application/x-protobuf"
    response = client.post(
        TRACES_URL, b"\xff\x00garbage{", content_type=content_type,
        headers={"Authorization": f"Bearer {agent_token}"},
    )  # fmt: skip
    assert response.status_code == 400
    if encoding == "json":
        assert response.json()["code"] == 3
        assert "JSON" in response.json()["message"]
    else:
        assert b"protobuf" in response.content


def test_other_content_types_get_415(client: Client, agent_token: str) -> None:
    response = client.post(
        TRACES_URL, b"a=b", content_type="text/plain",
        headers={"Authorization": f"Bearer {agent_token}"},
    )  # fmt: skip
    assert response.status_code == 415


def test_a_gzip_bomb_is_refused_with_413(
    client: Client, agent_token: str, settings: object
) -> None:
    settings.OTLP_MAX_BODY_BYTES = 10_000  # type: ignore[attr-defined]
    body = gzip.compress(b"\x00" * 1_000_000)
    response = client.post(
        TRACES_URL, body, content_type="application/x-protobuf",
        headers={"Authorization": f"Bearer {agent_token}", "Content-Encoding": "gzip"},
    )  # fmt: skip
    assert response.status_code == 413


@pytest.mark.parametrize("authorization", [None, "Bearer nope", "Basic eDp5"])
def test_a_missing_or_unknown_token_gets_401(client: Client, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = client.post(TRACES_URL, b"", content_type="application/x-protobuf", headers=headers)
    assert response.status_code == 401
    assert not Run.objects.exists()


def test_the_endpoint_needs_no_session_and_no_csrf_token(agent_token: str) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post(
        TRACES_URL, export([tool_span(trace_id(19))]).SerializeToString(),
        content_type="application/x-protobuf", headers={"Authorization": f"Bearer {agent_token}"},
    )  # fmt: skip
    assert response.status_code == 200


def test_without_redis_the_export_gets_503_with_retry_after_and_nothing_is_written(
    post_spans: PostSpans, settings: object
) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # type: ignore[attr-defined]
    response = post_spans([tool_span(trace_id(20), error_type="TimeoutError")])
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert not Run.objects.exists() and not ToolCall.objects.exists()


def test_runs_reported_through_the_events_api_stay_marked_sdk(
    client: Client, agent_token: str
) -> None:
    events = [{"id": "e-1", "type": "run.started", "ts": "2026-11-29T09:00:00Z", "run_id": "r-sdk",
               "agent": "research"}]  # fmt: skip
    response = client.post(
        "/api/v1/events", {"worker_id": "w-sdk", "events": events},
        content_type="application/json", headers={"Authorization": f"Bearer {agent_token}"},
    )  # fmt: skip
    assert response.status_code == 200
    run = Run.objects.get()
    assert (run.source, run.cost_estimated) == ("sdk", False)


def test_a_trace_whose_spans_come_from_two_workers_makes_a_run_on_each(
    post_spans: PostSpans,
) -> None:
    # Runs are per worker (ids are scoped by token and worker), so neither worker's spans can
    # change the other's run.
    trace = trace_id(21)
    post_spans([tool_span(trace, resource={"service.instance.id": "w-a"})])
    response = post_spans([tool_span(trace, "fetch", resource={"service.instance.id": "w-b"})])
    assert response.partial == (0, "")
    runs = Run.objects.order_by("worker__worker_id")
    assert [(r.run_id, r.worker.worker_id, r.tool_calls) for r in runs] == [
        (f"otlp-{trace}", "w-a", 1), (f"otlp-{trace}", "w-b", 1),
    ]  # fmt: skip


def test_a_token_bound_to_one_worker_cannot_send_another_workers_spans(
    client: Client,
) -> None:
    _, raw = AgentToken.issue(name="bound", worker_id="w-1")
    spans = [
        tool_span(trace_id(22)),
        tool_span(trace_id(23), resource={"service.instance.id": "w-2"}),
    ]
    response = client.post(
        TRACES_URL, export(spans).SerializeToString(), content_type="application/x-protobuf",
        headers={"Authorization": f"Bearer {raw}"},
    )  # fmt: skip
    reply = ExportTraceServiceResponse.FromString(response.content)
    assert reply.partial_success.rejected_spans == 1
    assert "bound to worker 'w-1'" in reply.partial_success.error_message
    assert list(Run.objects.values_list("worker__worker_id", flat=True)) == ["w-1"]
