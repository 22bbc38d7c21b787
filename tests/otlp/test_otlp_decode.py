"""Decoding OTLP bodies (pure: no database)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from runs.otlp.decode import BadExport, decode_export
from runs.otlp.mapping import MappingConfig, map_spans
from tests.otlp.exporters import otlp_json
from tests.otlp.spans import export, tool_span, trace_id


def decode_json(document: dict[str, Any], **kw: Any) -> Any:
    return decode_export(
        json.dumps(document).encode(), content_type="application/json", content_encoding="",
        max_bytes=1_000_000, **kw,
    )  # fmt: skip


def one_span(**span: Any) -> dict[str, Any]:
    base = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
            "name": "execute_tool fetch", "startTimeUnixNano": "1796000000000000000",
            "endTimeUnixNano": "1796000001500000000"}  # fmt: skip
    return {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.instance.id", "value": {"stringValue": "w-9"}}]},
        "scopeSpans": [{"spans": [base | span]}]}]}  # fmt: skip


def test_the_same_export_decodes_the_same_from_protobuf_and_json() -> None:
    request = export([tool_span(trace_id(1), error_type="TimeoutError")])
    from_proto = decode_export(
        request.SerializeToString(), content_type="application/x-protobuf",
        content_encoding="", max_bytes=1_000_000,
    )  # fmt: skip
    from_json = decode_export(
        gzip.compress(otlp_json(request)), content_type="application/json",
        content_encoding="gzip", max_bytes=1_000_000,
    )  # fmt: skip
    assert from_proto.spans == from_json.spans
    assert from_proto.spans[0].trace_id == trace_id(1)


def test_json_enums_may_be_numbers_or_names_and_integers_strings_or_numbers() -> None:
    decoded = decode_json(one_span(
        kind="SPAN_KIND_CLIENT", status={"code": "STATUS_CODE_ERROR", "message": "boom"},
        startTimeUnixNano=1796000000000000000,
        attributes=[
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "http.response.status_code", "value": {"intValue": "503"}},
            {"key": "list", "value": {"arrayValue": {"values": [{"doubleValue": 1.5}]}}},
            {"key": "raw", "value": {"bytesValue": "AQI="}},
            {"key": "unknown.kind", "value": {"somethingNew": 1}},
        ],
    ))  # fmt: skip
    span = decoded.spans[0]
    assert (span.kind, span.status_code, span.status_message) == (3, 2, "boom")
    assert span.start_ns == 1796000000000000000
    assert span.attributes["http.response.status_code"] == 503
    assert span.attributes["list"] == [1.5]
    assert span.attributes["raw"] == "0102"
    assert span.attributes["unknown.kind"] is None


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("traceId", "W47/95gDgQPSabYzgT/GDA==", "traceId must be 32 hex digits"),  # base64
        ("traceId", "00000000000000000000000000000000", "traceId must not be all zero"),
        ("spanId", "eee19b7ec3c1b1", "spanId must be 16 hex digits"),
        ("startTimeUnixNano", "-5", "startTimeUnixNano must be a non-negative integer"),
    ],
)
def test_a_span_with_a_bad_field_is_reported_by_name(field: str, value: str, reason: str) -> None:
    decoded = decode_json(one_span(**{field: value}))
    assert decoded.spans == []
    [(position, message)] = decoded.invalid
    assert position == 0 and message.startswith(reason)


def test_a_root_spans_parent_may_be_empty_or_zeros() -> None:
    for parent in ("", "0000000000000000"):
        assert decode_json(one_span(parentSpanId=parent)).spans[0].parent_span_id == ""


@pytest.mark.parametrize(
    "document",
    [
        {"resourceSpans": {}},
        {"resourceSpans": [{"scopeSpans": 3}]},
        {"resourceSpans": [{"resource": []}]},
    ],
)
def test_a_wrong_structure_is_refused_whole_naming_the_field(document: dict[str, Any]) -> None:
    with pytest.raises(BadExport) as refused:
        decode_json(document)
    assert "resourceSpans" in refused.value.detail
    assert refused.value.status == 400


def test_an_empty_export_is_fine() -> None:
    assert decode_json({}).spans == []
    assert map_spans([], config=MappingConfig()).batches == {}
