"""``POST /v1/traces``: OTLP/HTTP with protobuf or JSON bodies, gzip, and ``partial_success``.

Outside ``/api/``: exporters post to ``<endpoint>/v1/traces``. Token auth (no session, no CSRF).
Statuses follow the OTLP/HTTP spec: 400 for what must not be retried, 503 + ``Retry-After`` for
what may be, and the reply in the request's own encoding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from runs.auth import AgentAuth
from runs.otlp.decode import JSON, PROTOBUF, BadExport, decode_export
from runs.otlp.receiver import OtlpResult, ingest_otlp_export, mapping_config
from runs.replies import DB_UNAVAILABLE_RETRY_AFTER_S
from runs.services import IngestConflict

CONFLICT_RETRY_AFTER_S = 1
REDIS_RETRY_AFTER_S = 2
# google.rpc.Code values for the error body (google.rpc.Status).
_INVALID_ARGUMENT, _UNAUTHENTICATED, _UNAVAILABLE = 3, 16, 14


@csrf_exempt
@login_not_required
@require_POST
def post_traces(request: HttpRequest) -> HttpResponse:
    encoding = _encoding(request)
    token = AgentAuth().authenticate(request, _bearer(request))
    if token is None:
        response = _status(encoding, 401, _UNAUTHENTICATED, "missing or unknown agent token")
        response["WWW-Authenticate"] = "Bearer"
        return response
    max_bytes = settings.OTLP_MAX_BODY_BYTES
    if _declared_length(request) > max_bytes:
        return _status(encoding, 413, _INVALID_ARGUMENT, f"body larger than {max_bytes} bytes")
    body = request.read(max_bytes + 1)
    if len(body) > max_bytes:
        return _status(encoding, 413, _INVALID_ARGUMENT, f"body larger than {max_bytes} bytes")
    try:
        export = decode_export(
            body,
            content_type=encoding,
            content_encoding=request.headers.get("Content-Encoding", ""),
            max_bytes=max_bytes * 4,
        )
        if len(export.spans) > settings.OTLP_MAX_SPANS:
            raise BadExport(
                f"{len(export.spans)} spans in one export; the limit is "
                f"{settings.OTLP_MAX_SPANS} (set the exporter's max export batch size lower)",
                status=413,
            )
        result = ingest_otlp_export(export=export, config=mapping_config(), token=token)
    except BadExport as exc:
        return _status(encoding, exc.status, _INVALID_ARGUMENT, exc.detail)
    except IngestConflict:
        return _retry_later(
            encoding, "a concurrent export changed the same run", CONFLICT_RETRY_AFTER_S
        )
    except (OperationalError, InterfaceError):
        return _retry_later(encoding, "database unavailable", DB_UNAVAILABLE_RETRY_AFTER_S)
    except redis.RedisError:
        return _retry_later(encoding, "fleet store (Redis) unavailable", REDIS_RETRY_AFTER_S)
    return _success(encoding, result)


def _encoding(request: HttpRequest) -> str:
    content_type = request.content_type or ""
    return JSON if content_type == JSON else PROTOBUF if content_type == PROTOBUF else content_type


def _bearer(request: HttpRequest) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _success(encoding: str, result: OtlpResult) -> HttpResponse:
    reply = ExportTraceServiceResponse()
    if result.rejected_spans:
        reply.partial_success.rejected_spans = len(result.rejected_spans)
        reply.partial_success.error_message = result.error_message
    if encoding == JSON:
        partial = {}
        if result.rejected_spans:
            partial = {
                "partialSuccess": {
                    "rejectedSpans": str(len(result.rejected_spans)),
                    "errorMessage": result.error_message,
                }
            }
        return _json(200, partial)
    return HttpResponse(reply.SerializeToString(), content_type=PROTOBUF)


def _retry_later(encoding: str, detail: str, seconds: int) -> HttpResponse:
    response = _status(encoding, 503, _UNAVAILABLE, f"{detail}; nothing was lost, retry the export")
    response["Retry-After"] = str(seconds)
    return response


def _status(encoding: str, http_status: int, code: int, message: str) -> HttpResponse:
    """A ``google.rpc.Status`` body, as the OTLP/HTTP spec asks for failed requests."""
    if encoding == JSON:
        return _json(http_status, {"code": code, "message": message})
    text = message.encode()
    # google.rpc.Status {int32 code = 1; string message = 2}, written by hand: two fields do
    # not justify another dependency.
    body = b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text
    return HttpResponse(body, status=http_status, content_type=PROTOBUF)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _json(status: int, document: Mapping[str, object]) -> HttpResponse:
    return HttpResponse(json.dumps(document), status=status, content_type=JSON)
