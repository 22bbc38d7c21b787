"""Decode an OTLP/HTTP trace export (protobuf or JSON, optionally gzip) into plain ``SpanRecord``s.

OTLP/JSON writes trace and span ids as hex, not as protobuf's base64 for bytes; protobuf's own
JSON parser would silently read a hex id as base64 (a 32-hex-digit trace id decodes to 24 bytes).
So ids are checked and converted here before the generic parser sees the document.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = (
    "JSON",
    "PROTOBUF",
    "BadExport",
    "DecodedExport",
    "SpanRecord",
    "decode_export",
)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

_TRACE_ID_BYTES = 16
_SPAN_ID_BYTES = 8
# Span.kind / Status.code numbers from the OTLP proto.
STATUS_ERROR = 2
SPAN_KIND_SERVER = 2


class BadExport(Exception):
    """The body cannot be read as an export at all: 400, and the exporter must not retry it."""

    def __init__(self, detail: str, *, status: int = 400) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One span with what the mapping needs, ids as lower-case hex, times in Unix nanoseconds."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int = 0
    status_message: str = ""
    exception_type: str = ""
    exception_message: str = ""


@dataclass(slots=True)
class DecodedExport:
    spans: list[SpanRecord] = field(default_factory=list)
    # (span position in the export, reason) for spans that could not be read (bad ids).
    invalid: list[tuple[int, str]] = field(default_factory=list)


def decode_export(
    body: bytes, *, content_type: str, content_encoding: str, max_bytes: int
) -> DecodedExport:
    """Unzip, parse and flatten one ``ExportTraceServiceRequest``."""
    raw = _decompress(body, content_encoding, max_bytes=max_bytes)
    if content_type == PROTOBUF:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(raw)
        except DecodeError as exc:
            raise BadExport(
                f"body is not an OTLP protobuf ExportTraceServiceRequest: {exc}"
            ) from None
    elif content_type == JSON:
        request = _parse_json(raw)
    else:
        raise BadExport(
            f"Content-Type {content_type!r} is not supported; send {PROTOBUF} or {JSON}",
            status=415,
        )
    return _flatten(request)


def _decompress(body: bytes, encoding: str, *, max_bytes: int) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise BadExport(
            f"Content-Encoding {encoding!r} is not supported; use gzip or none", status=415
        )
    # Bounded: a small gzip body must not expand into gigabytes (a "zip bomb").
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        raw = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise BadExport(f"body is not valid gzip: {exc}") from None
    if len(raw) > max_bytes:
        raise BadExport(f"body is larger than {max_bytes} bytes once unzipped", status=413)
    if not inflater.eof:
        raise BadExport("gzip body is truncated")
    return raw


def _parse_json(raw: bytes) -> ExportTraceServiceRequest:
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadExport(f"body is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise BadExport("body must be a JSON object with 'resourceSpans'")
    _hex_ids_to_base64(document)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise BadExport(f"body is not an OTLP/JSON trace export: {exc}") from None
    # Spans whose ids were not hex now have an empty id, which _flatten reports as invalid.
    return request


def _hex_ids_to_base64(document: dict[str, Any]) -> None:
    """Rewrite every span's hex ids in place as the base64 protobuf's parser expects. An id
    that is not hex of the right length is blanked, so the span is reported as invalid."""
    for resource_spans in _list(document.get("resourceSpans")):
        for scope_spans in _list(_dict(resource_spans).get("scopeSpans")):
            for span in _list(_dict(scope_spans).get("spans")):
                if not isinstance(span, dict):
                    continue
                for key, size in (("traceId", 16), ("spanId", 8), ("parentSpanId", 8)):
                    if key in span:
                        span[key] = _hex_to_base64(span[key], size, optional=key == "parentSpanId")
                span.pop("links", None)  # links are not used; dropping them skips their ids


def _hex_to_base64(value: object, size: int, *, optional: bool) -> str:
    if not isinstance(value, str) or (optional and value == ""):
        return ""
    try:
        data = bytes.fromhex(value)
    except ValueError:
        return ""
    return base64.b64encode(data).decode() if len(data) == size else ""


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _flatten(request: ExportTraceServiceRequest) -> DecodedExport:
    out = DecodedExport()
    position = 0
    for resource_spans in request.resource_spans:
        resource = attributes_to_dict(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                reason = _id_problem(span.trace_id, span.span_id, span.parent_span_id)
                if reason is not None:
                    out.invalid.append((position, reason))
                else:
                    out.spans.append(_record(span, resource))
                position += 1
    return out


def _id_problem(trace_id: bytes, span_id: bytes, parent: bytes) -> str | None:
    if len(trace_id) != _TRACE_ID_BYTES or not any(trace_id):
        return "traceId must be 16 bytes (32 hex digits in JSON), not all zero"
    if len(span_id) != _SPAN_ID_BYTES or not any(span_id):
        return "spanId must be 8 bytes (16 hex digits in JSON), not all zero"
    if parent and len(parent) != _SPAN_ID_BYTES:
        return "parentSpanId must be empty or 8 bytes (16 hex digits in JSON)"
    return None


def _record(span: Any, resource: dict[str, Any]) -> SpanRecord:
    exception_type = exception_message = ""
    for event in span.events:
        if event.name == "exception":
            found = attributes_to_dict(event.attributes)
            exception_type = str(found.get("exception.type", ""))
            exception_message = str(found.get("exception.message", ""))
            break
    return SpanRecord(
        trace_id=binascii.hexlify(span.trace_id).decode(),
        span_id=binascii.hexlify(span.span_id).decode(),
        parent_span_id=binascii.hexlify(span.parent_span_id).decode(),
        name=span.name,
        kind=int(span.kind),
        start_ns=int(span.start_time_unix_nano),
        end_ns=int(span.end_time_unix_nano),
        attributes=attributes_to_dict(span.attributes),
        resource=resource,
        status_code=int(span.status.code),
        status_message=span.status.message,
        exception_type=exception_type,
        exception_message=exception_message,
    )


def attributes_to_dict(attributes: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` list -> plain dict (arrays as lists, maps as dicts, bytes as hex)."""
    return {kv.key: _value(kv.value) for kv in attributes if isinstance(kv, KeyValue)}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes_to_dict(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)
