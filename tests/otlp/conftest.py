"""Fixtures for the OTLP receiver tests: a token and helpers that post exports (helpers in
``support``)."""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from typing import Any

import pytest
import redis
from django.test import Client
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from runs.models import AgentToken
from tests.otlp.exporters import otlp_json
from tests.otlp.spans import FakeSpan, export
from tests.otlp.support import TRACES_URL, PostSpans


@pytest.fixture(autouse=True)
def _clean_redis(redis_client: redis.Redis) -> None:
    """Accepted tool calls also reach the fleet counters in Redis (this session's own db)."""


@pytest.fixture
def agent_token(db: None) -> str:
    return AgentToken.issue(name="otel-agents")[1]


@pytest.fixture
def post_spans(client: Client, agent_token: str) -> PostSpans:
    """POST spans as one export (``encoding`` "protobuf" or "json", optionally gzipped);
    returns the response with ``.partial`` set to (rejected_spans, error_message)."""

    def post(
        spans: Sequence[FakeSpan], *, encoding: str = "protobuf", gzipped: bool = False,
        token: str | None = agent_token,
    ) -> Any:  # fmt: skip
        request = export(spans)
        if encoding == "json":
            body, content_type = otlp_json(request), "application/json"
        else:
            body, content_type = request.SerializeToString(), "application/x-protobuf"
        headers: dict[str, str] = {}
        if gzipped:
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        response = client.post(TRACES_URL, body, content_type=content_type, headers=headers)
        response.partial = _partial(response, encoding)  # type: ignore[attr-defined]
        return response

    return post


def _partial(response: Any, encoding: str) -> tuple[int, str] | None:
    if response.status_code != 200:
        return None
    if encoding == "json":
        partial = response.json().get("partialSuccess") or {}
        return int(partial.get("rejectedSpans", 0)), partial.get("errorMessage", "")
    reply = ExportTraceServiceResponse()
    reply.ParseFromString(response.content)
    return reply.partial_success.rejected_spans, reply.partial_success.error_message
