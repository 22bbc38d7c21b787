"""Decode an OTLP/HTTP trace export (protobuf or JSON, optionally gzip) into plain ``SpanRecord``s.

OTLP/JSON writes trace and span ids as hex, not as protobuf's base64 for bytes; protobuf's own
JSON parser would silently read a hex id as base64 (a 32-hex-digit trace id decodes to 24 bytes).
So JSON bodies are read here directly, ids as hex, and a bad id rejects its span by name.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

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
_INT64 = range(-(2**63), 2**63)
_UINT64_MAX = 2**64 - 1
# Attribute values nested deeper than this are dropped (as an unknown value kind is): no mapping
# reads a nested value, and deep ones would only cost stack.
MAX_VALUE_DEPTH = 16
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
    positions: list[int] = field(default_factory=list)  # each span's position in the export
    # (span position in the export, reason) for spans that could not be read (bad ids).
    invalid: list[tuple[int, str]] = field(default_factory=list)

    def add(self, span: SpanRecord, position: int) -> None:
        self.spans.append(span)
        self.positions.append(position)


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
        return _parse_json(raw)
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


def _parse_json(raw: bytes) -> DecodedExport:
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadExport(f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadExport("body is nested too deeply to be an OTLP export") from None
    if not isinstance(document, dict):
        raise BadExport("body must be a JSON object with 'resourceSpans'")
    return _flatten_json(document)


def _flatten_json(document: dict[str, Any]) -> DecodedExport:
    """OTLP/JSON read directly (protobuf's generic JSON parser is slow and misreads hex ids):
    camelCase keys, ids in hex, 64-bit integers as numbers or strings, enums as integers (their
    names are accepted too). Unknown keys are ignored."""
    out = DecodedExport()
    position = 0
    for i, resource_spans in enumerate(_array(document, "resourceSpans", "")):
        where = f"resourceSpans[{i}]"
        resource = _json_attributes(_object(resource_spans, "resource", where).get("attributes"))
        for j, scope_spans in enumerate(_array(resource_spans, "scopeSpans", where)):
            for span in _array(scope_spans, "spans", f"{where}.scopeSpans[{j}]"):
                try:
                    out.add(_json_span(span, resource), position)
                except ValueError as exc:
                    out.invalid.append((position, str(exc)))
                position += 1
    return out


def _array(parent: object, key: str, where: str) -> list[Any]:
    value = parent.get(key) if isinstance(parent, dict) else None
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadExport(f"'{where + '.' if where else ''}{key}' must be an array")
    return value


def _object(parent: object, key: str, where: str) -> dict[str, Any]:
    value = parent.get(key) if isinstance(parent, dict) else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadExport(f"'{where}.{key}' must be an object")
    return value


def _json_span(span: object, resource: dict[str, Any]) -> SpanRecord:
    if not isinstance(span, dict):
        raise ValueError("a span must be a JSON object")
    exception_type = exception_message = ""
    for event in span.get("events") or []:
        if isinstance(event, dict) and event.get("name") == "exception":
            found = _json_attributes(event.get("attributes"))
            exception_type = _text(found.get("exception.type"))
            exception_message = _text(found.get("exception.message"))
            break
    status = span.get("status")
    if not isinstance(status, dict):
        status = {}
    name = span.get("name", "")
    return SpanRecord(
        trace_id=_json_id(span.get("traceId"), _TRACE_ID_BYTES, "traceId"),
        span_id=_json_id(span.get("spanId"), _SPAN_ID_BYTES, "spanId"),
        parent_span_id=_json_id(span.get("parentSpanId"), _SPAN_ID_BYTES, "parentSpanId", True),
        name=name if isinstance(name, str) else "",
        kind=_enum(span.get("kind"), _SPAN_KINDS),
        start_ns=_uint64(span.get("startTimeUnixNano"), "startTimeUnixNano"),
        end_ns=_uint64(span.get("endTimeUnixNano"), "endTimeUnixNano"),
        attributes=_json_attributes(span.get("attributes")),
        resource=resource,
        status_code=_enum(status.get("code"), _STATUS_CODES),
        status_message=_text(status.get("message")),
        exception_type=exception_type,
        exception_message=exception_message,
    )


_SPAN_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5,
}  # fmt: skip
_STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


def _json_id(value: object, size: int, field: str, optional: bool = False) -> str:
    if optional and value in (None, ""):
        return ""
    digits = size * 2
    if not isinstance(value, str) or len(value) != digits:
        raise ValueError(f"{field} must be {digits} hex digits")
    try:
        data = bytes.fromhex(value)
    except ValueError:
        data = b""
    if len(data) != size:  # fromhex skips spaces, so 32 characters may hold fewer digits
        raise ValueError(f"{field} must be {digits} hex digits")
    if not any(data):
        if optional:
            return ""  # some exporters write a root span's parent as zeros
        raise ValueError(f"{field} must not be all zero")
    return data.hex()


def _enum(value: object, names: dict[str, int]) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return names.get(value, 0) if isinstance(value, str) else 0


def _uint64(value: object, field: str) -> int:
    if value is None:
        return 0
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _UINT64_MAX:
        return value
    raise ValueError(f"{field} must be a non-negative integer below 2^64 (digits in JSON)")


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _json_attributes(values: object, depth: int = 0) -> dict[str, Any]:
    if not isinstance(values, list):
        return {}
    return {
        item["key"]: _json_value(item.get("value"), depth)
        for item in values
        if isinstance(item, dict) and isinstance(item.get("key"), str)
    }


def _json_value(value: object, depth: int = 0) -> Any:
    """One ``AnyValue``; a value of the wrong type for its kind (a 1e999 ``intValue``, an
    object as ``stringValue``) is dropped like an unknown kind, as protobuf could not hold it."""
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        return value["stringValue"] if isinstance(value["stringValue"], str) else None
    if "boolValue" in value:
        return value["boolValue"] if isinstance(value["boolValue"], bool) else None
    if "intValue" in value:
        return _int64(value["intValue"])
    if "doubleValue" in value:
        return _double(value["doubleValue"])
    if depth >= MAX_VALUE_DEPTH:
        return None
    if "arrayValue" in value:
        array = value["arrayValue"]
        items = array.get("values") if isinstance(array, dict) else None
        return [_json_value(item, depth + 1) for item in items] if isinstance(items, list) else []
    if "kvlistValue" in value:
        kvlist = value["kvlistValue"]
        return _json_attributes(
            kvlist.get("values") if isinstance(kvlist, dict) else None, depth + 1
        )
    if "bytesValue" in value and isinstance(value["bytesValue"], str):
        try:
            return base64.b64decode(value["bytesValue"]).hex()
        except (binascii.Error, ValueError):
            return None
    return None


def _int64(raw: object) -> int | None:
    """An ``intValue``: a JSON number or a string of digits, within int64."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, float) and raw.is_integer():  # 1e3 is an integer; inf and nan are not
        raw = int(raw)
    elif isinstance(raw, str) and len(raw) <= 20:
        try:
            raw = int(raw)
        except ValueError:
            return None
    return raw if isinstance(raw, int) and raw in _INT64 else None


def _double(raw: object) -> float | None:
    """A ``doubleValue``: a number, or a string such as "Infinity" or "NaN" as the spec allows."""
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        return None
    try:
        return float(raw)
    except (ValueError, OverflowError):  # a 400-digit integer has no float
        return None


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
                    out.add(_record(span, resource), position)
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
            exception_type = _text(found.get("exception.type"))
            exception_message = _text(found.get("exception.message"))
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


def attributes_to_dict(attributes: Any, depth: int = 0) -> dict[str, Any]:
    """OTLP ``KeyValue`` list -> plain dict (arrays as lists, maps as dicts, bytes as hex)."""
    return {kv.key: _value(kv.value, depth) for kv in attributes if isinstance(kv, KeyValue)}


def _value(value: AnyValue, depth: int = 0) -> Any:
    which = value.WhichOneof("value")
    if which is None or (which in ("array_value", "kvlist_value") and depth >= MAX_VALUE_DEPTH):
        return None
    if which == "array_value":
        return [_value(item, depth + 1) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes_to_dict(value.kvlist_value.values, depth + 1)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)
