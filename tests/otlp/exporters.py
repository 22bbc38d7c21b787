"""OTLP exporters for the tests: the SDK's protobuf exporter, and an OTLP/JSON one.

No OTLP/JSON span exporter is published for Python (``opentelemetry-exporter-otlp-json-http``
does not exist on PyPI), so ``JsonSpanExporter`` encodes spans with the SDK's own OTLP encoder
and writes the JSON mapping the OTLP spec defines: camelCase keys, enums as integers, 64-bit
integers as strings and trace/span ids as hex (not protobuf's base64).
"""

from __future__ import annotations

import base64
import gzip
import json
import urllib.request
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

TIMEOUT_S = 10


def otlp_json(request: ExportTraceServiceRequest) -> bytes:
    document: dict[str, Any] = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document).encode()


class JsonSpanExporter(SpanExporter):
    def __init__(self, endpoint: str, headers: dict[str, str], *, gzip_body: bool = True) -> None:
        self.endpoint = endpoint
        self.headers = headers
        self.gzip_body = gzip_body
        self.replies: list[tuple[int, bytes]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        body = otlp_json(encode_spans(spans))
        headers = {"Content-Type": "application/json", **self.headers}
        if self.gzip_body:
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
                self.replies.append((reply.status, reply.read()))
        except urllib.error.HTTPError as error:
            self.replies.append((error.code, error.read()))
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass
