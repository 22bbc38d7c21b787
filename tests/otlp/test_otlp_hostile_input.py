"""Hostile and careless exports (issue 23): each answers 200, 400, 413 or 415, never 500; a bad
span or resource is rejected alone in ``partial_success`` and the rest of the export lands."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from runs.models import ModelCall, Run, ToolCall
from tests.otlp.exporters import otlp_json
from tests.otlp.spans import T0_NS, FakeSpan, agent_span, export, model_span, tool_span, trace_id
from tests.otlp.support import TRACES_URL, PostSpans

pytestmark = pytest.mark.django_db

PostJson = Callable[[bytes], Any]
PLACEHOLDER = "__placeholder__"
LONG = "w" * 201


@pytest.fixture(autouse=True)
def _server_errors_as_responses(client: Client) -> None:
    """A 500 is an answer to assert on (and to report), not an exception in the test."""
    client.raise_request_exception = False


@pytest.fixture
def post_json(client: Client, agent_token: str) -> PostJson:
    """POST a raw OTLP/JSON body; returns the response with ``.partial`` as ``post_spans``."""

    def post(body: bytes) -> Any:
        response = client.post(
            TRACES_URL, body, content_type="application/json",
            headers={"Authorization": f"Bearer {agent_token}"},
        )  # fmt: skip
        partial = response.json().get("partialSuccess") or {} if response.status_code == 200 else {}
        response.partial = (int(partial.get("rejectedSpans", 0)), partial.get("errorMessage", ""))  # type: ignore[attr-defined]
        return response

    return post


def json_body(spans: list[FakeSpan], *, text: str = "", value: str = "") -> bytes:
    """The spans as OTLP/JSON, where a span or resource holds the placeholder: ``text`` puts a
    string there (written by ``json.dumps``), ``value`` puts raw JSON in place of the whole
    ``AnyValue``. The way to write what protobuf cannot hold (1e999, a lone surrogate)."""
    body = otlp_json(export(spans)).decode()
    if value:
        body = body.replace(f'{{"stringValue": "{PLACEHOLDER}"}}', value)
    if text:
        body = body.replace(f'"{PLACEHOLDER}"', json.dumps(text))
    assert PLACEHOLDER not in body or not (text or value)
    return body.encode()


def stored() -> tuple[int, int, int]:
    return Run.objects.count(), ToolCall.objects.count(), ModelCall.objects.count()


def assert_no_half_written_run() -> None:
    assert set(Run.objects.values_list("source", flat=True)) <= {"otlp"}


def test_json_nested_ten_thousand_deep_is_refused_with_400(post_json: PostJson) -> None:
    response = post_json(b'{"resourceSpans": ' + b"[" * 10_000 + b"]" * 10_000 + b"}")
    assert response.status_code == 400
    assert response.json()["code"] == 3
    assert "nested" in response.json()["message"]


def test_a_deeply_nested_attribute_does_not_break_the_span(post_json: PostJson) -> None:
    # Deep, but within what the JSON parser reads: the attribute's value is dropped, not the span.
    deep = '{"arrayValue": {"values": [' * 300 + "]}}" * 300
    span = tool_span(trace_id(1), extra={"vendor.deep": PLACEHOLDER})
    response = post_json(json_body([span], value=deep))
    assert response.status_code == 200
    assert response.partial == (0, "")
    assert stored() == (1, 1, 0)


@pytest.mark.parametrize(
    "value",
    [
        '{"intValue": 1e999}',
        '{"intValue": -1e999}',
        '{"intValue": Infinity}',
        '{"intValue": NaN}',
        '{"intValue": "1e999"}',
        '{"intValue": 100000000000000000000000000000}',
        '{"doubleValue": Infinity}',
        '{"stringValue": [[[[{"a": 1}]]]]}',
        '{"boolValue": {"x": 1}}',
    ],
)
def test_an_unrepresentable_attribute_value_is_dropped_and_the_span_lands(
    post_json: PostJson, value: str
) -> None:
    span = model_span(trace_id(2), extra={"gen_ai.usage.input_tokens": PLACEHOLDER})
    response = post_json(json_body([span], value=value))
    assert response.status_code == 200
    assert response.partial == (0, "")
    assert ModelCall.objects.get().input_tokens == 0  # not an int64: as if it were absent


@pytest.mark.parametrize("field", ["startTimeUnixNano", "endTimeUnixNano"])
@pytest.mark.parametrize("value", ["1" + "0" * 30, '"1' + "0" * 30 + '"'])
def test_a_timestamp_past_uint64_rejects_its_span_alone(
    post_json: PostJson, field: str, value: str
) -> None:
    trace = trace_id(3)
    good, bad = tool_span(trace, "fetch"), tool_span(trace, "web_search", start=0.5)
    document = json.loads(json_body([good, bad]))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[1][field] = PLACEHOLDER
    body = json.dumps(document).replace(f'"{PLACEHOLDER}"', value).encode()
    response = post_json(body)
    assert response.status_code == 200
    rejected, message = response.partial
    assert rejected == 1 and field in message
    assert list(ToolCall.objects.values_list("tool", flat=True)) == ["fetch"]
    assert_no_half_written_run()


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_a_span_dated_past_2500_is_rejected_alone_even_as_the_first_of_its_run(
    post_spans: PostSpans, encoding: str
) -> None:
    # A valid uint64 (which ends in 2554), past what the ingest stores. As the first span of
    # its run it would have dated the run, and the whole run would have been refused.
    trace = trace_id(4)
    late_end_s = (18_000_000_000_000_000_000 - T0_NS) / 1e9  # in 2540
    late = tool_span(trace, "web_search", start=0, end=late_end_s)
    response = post_spans([late, tool_span(trace, "fetch", start=1, end=2)], encoding=encoding)
    assert response.status_code == 200
    rejected, message = response.partial
    assert rejected == 1 and "endTimeUnixNano" in message
    assert list(ToolCall.objects.values_list("tool", flat=True)) == ["fetch"]


BAD_TEXT = [
    pytest.param("protobuf", "x\x00y", id="nul-protobuf"),
    pytest.param("json", "x\x00y", id="nul-json"),
    pytest.param("json", "x\ud800y", id="surrogate-json"),
]


def post_either(post_spans: PostSpans, post_json: PostJson, spans: list[FakeSpan], encoding: str,
                bad: str) -> Any:  # fmt: skip
    """Post ``spans``, with ``bad`` wherever a span or resource holds the placeholder."""
    if encoding == "protobuf":
        for span in spans:
            for values in (span.attributes, span.resource):
                for key, value in values.items():
                    if value == PLACEHOLDER:
                        values[key] = bad
        return post_spans(spans)
    return post_json(json_body(spans, text=bad))


@pytest.mark.parametrize("attribute", ["gen_ai.agent.name", "gen_ai.conversation.id"])
@pytest.mark.parametrize(("encoding", "bad"), BAD_TEXT)
def test_a_bad_agent_name_or_conversation_id_rejects_its_span_alone_also_on_resend(
    post_spans: PostSpans, post_json: PostJson, attribute: str, encoding: str, bad: str
) -> None:
    trace = trace_id(5)
    agent = agent_span(trace, start=0, end=10)
    agent.attributes[attribute] = PLACEHOLDER
    tool = tool_span(trace, start=1, end=2)
    for attempt in range(2):  # exporters resend what they think was lost: same answer
        spans = [tool, agent]
        response = post_either(post_spans, post_json, spans, encoding, bad)
        assert response.status_code == 200, attempt
        rejected, message = response.partial
        assert rejected == 1 and attribute in message
        run = Run.objects.get()
        assert (run.source, run.status, run.tool_calls) == ("otlp", "running", 1)
    assert_no_half_written_run()


BAD_RESOURCES = [
    ({"service.instance.id": LONG}, "service.instance.id", "long-instance"),
    ({"service.instance.id": PLACEHOLDER}, "service.instance.id", "bad-instance"),
    ({"service.name": LONG}, "service.name", "long-service-no-instance"),
    ({"host.name": "h" * 500, "process.pid": 7}, "host.name", "long-host"),
    ({"service.instance.id": "w-9", "service.name": PLACEHOLDER}, "service.name", "bad-service"),
]


def _resource_cases() -> list[Any]:
    """Each bad resource in both encodings, and with each bad text where it holds one."""
    cases = []
    for resource, attribute, name in BAD_RESOURCES:
        texts = BAD_TEXT if PLACEHOLDER in resource.values() else BAD_TEXT[:2]
        for text in texts:
            encoding, bad = text.values
            case_id = (
                f"{name}-{text.id}" if PLACEHOLDER in resource.values() else f"{name}-{encoding}"
            )
            cases.append(pytest.param(resource, attribute, encoding, bad, id=case_id))
    return cases


@pytest.mark.parametrize(("resource", "attribute", "encoding", "bad"), _resource_cases())
def test_a_bad_resource_between_good_ones_is_rejected_alone(
    post_spans: PostSpans,
    post_json: PostJson,
    resource: dict[str, Any],
    attribute: str,
    encoding: str,
    bad: str,
) -> None:
    spans = [
        tool_span(trace_id(6), "first", resource={"service.instance.id": "w-1"}),
        tool_span(trace_id(7), "bad-1", resource=dict(resource)),
        model_span(trace_id(7), resource=dict(resource)),
        tool_span(trace_id(8), "third", resource={"service.instance.id": "w-3"}),
    ]
    response = post_either(post_spans, post_json, spans, encoding, bad)
    assert response.status_code == 200
    rejected, message = response.partial
    assert rejected == 2 and attribute in message
    assert sorted(ToolCall.objects.values_list("tool", flat=True)) == ["first", "third"]
    assert not ModelCall.objects.exists()
    assert sorted(Run.objects.values_list("worker__worker_id", flat=True)) == ["w-1", "w-3"]
    assert_no_half_written_run()


@pytest.fixture
def refuse_agent_in_the_database() -> None:
    """A PostgreSQL trigger that refuses (as a data error) to name a run ``refused-by-db``: a
    failure of the run corrections that the receiver's own checks cannot foresee. Created in
    the test's transaction, so it goes with it."""
    with connection.cursor() as cursor:
        cursor.execute(
            """CREATE FUNCTION pg_temp.refuse_agent() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.agent = 'refused-by-db' THEN
                    RAISE EXCEPTION 'refused by the test' USING ERRCODE = '22000';
                END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER refuse_agent BEFORE UPDATE ON runs_run
                FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_agent();"""
        )


@pytest.mark.usefixtures("refuse_agent_in_the_database")
def test_a_worker_whose_run_correction_fails_writes_nothing_and_the_others_land(
    post_spans: PostSpans,
) -> None:
    # The corrections (source, agent name, end) run in the ingest's transaction: when they fail
    # the worker's events go too, rather than a run left half-written as "sdk".
    refused, kept = trace_id(9), trace_id(10)
    spans = [
        tool_span(refused, "lost", resource={"service.instance.id": "w-refused"}),
        agent_span(refused, name="refused-by-db", resource={"service.instance.id": "w-refused"}),
        tool_span(kept, "kept", resource={"service.instance.id": "w-kept"}),
        agent_span(kept, name="fine", resource={"service.instance.id": "w-kept"}),
    ]
    response = post_spans(spans)
    assert response.status_code == 200
    rejected, message = response.partial
    assert rejected == 2 and "database refused" in message
    run = Run.objects.get()
    assert (run.worker.worker_id, run.agent, run.source, run.status) == (
        "w-kept", "fine", "otlp", "completed",
    )  # fmt: skip
    assert list(ToolCall.objects.values_list("tool", flat=True)) == ["kept"]


def test_each_rejected_span_is_counted_once_by_its_position_in_the_export(
    post_spans: PostSpans,
) -> None:
    # The first span is unreadable (a zero trace id), the second is refused by the ingest: two
    # rejections, not one (they were once counted by two different numberings, both 0).
    unreadable = tool_span("00" * 16)
    refused = tool_span(trace_id(11), "web\x00search")
    response = post_spans([unreadable, refused, tool_span(trace_id(11), "fetch")])
    rejected, message = response.partial
    assert rejected == 2
    assert message.startswith("span 0: traceId") and "span 1: tool.call" in message
    assert list(ToolCall.objects.values_list("tool", flat=True)) == ["fetch"]


def test_a_json_id_with_spaces_is_not_read_as_a_shorter_id(post_json: PostJson) -> None:
    # bytes.fromhex skips spaces: 32 characters with two spaces would be a 15-byte trace id.
    document = json.loads(json_body([tool_span(trace_id(12))]))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "5b 8e " + "ab" * 13
    response = post_json(json.dumps(document).encode())
    rejected, message = response.partial
    assert rejected == 1 and "traceId must be 32 hex digits" in message
    assert not Run.objects.exists()
