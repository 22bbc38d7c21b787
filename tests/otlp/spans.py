"""Hand-made GenAI spans and OTLP export bodies, with ids and times the tests choose."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

T0_NS = 1_796_000_000_000_000_000  # 2026-11-30
_span_ids = itertools.count(1)

# Span.Kind values
INTERNAL, SERVER, CLIENT = 1, 2, 3


@dataclass
class FakeSpan:
    trace_id: str
    name: str
    attributes: dict[str, Any]
    start_s: float
    end_s: float
    parent: str = ""
    kind: int = INTERNAL
    error: bool = False
    exception: tuple[str, str] | None = None
    span_id: str = field(default_factory=lambda: f"{next(_span_ids):016x}")
    resource: dict[str, Any] = field(default_factory=lambda: {"service.instance.id": "w-1"})


def trace_id(n: int) -> str:
    return f"{n:032x}"


def agent_span(
    trace: str, *, name: str = "research", start: float = 0, end: float = 60, **kw: Any
) -> FakeSpan:
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    return FakeSpan(trace, f"invoke_agent {name}", attrs, start, end, **kw)


def tool_span(
    trace: str,
    tool: str = "web_search",
    *,
    start: float = 1,
    end: float = 2,
    error_type: str | None = None,
    extra: dict[str, Any] | None = None,
    **kw: Any,
) -> FakeSpan:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if error_type:
        attrs["error.type"] = error_type
    attrs |= extra or {}
    return FakeSpan(trace, f"execute_tool {tool}", attrs, start, end, error=bool(error_type), **kw)


def model_span(
    trace: str,
    *,
    model: str = "gpt-4o",
    input_tokens: int = 1000,
    output_tokens: int = 100,
    start: float = 0.5,
    end: float = 1,
    extra: dict[str, Any] | None = None,
    **kw: Any,
) -> FakeSpan:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": input_tokens,
        "gen_ai.usage.output_tokens": output_tokens,
    }
    attrs |= extra or {}
    return FakeSpan(trace, f"chat {model}", attrs, start, end, kind=CLIENT, **kw)


def _any(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(string_value=str(value))


def _kvs(values: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=_any(v)) for k, v in values.items()]


def export(spans: Sequence[FakeSpan]) -> ExportTraceServiceRequest:
    """One export; spans with the same resource share a ResourceSpans, as exporters do."""
    request = ExportTraceServiceRequest()
    groups: dict[tuple[tuple[str, Any], ...], list[FakeSpan]] = {}
    for span in spans:
        groups.setdefault(tuple(sorted(span.resource.items())), []).append(span)
    for resource, members in groups.items():
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(_kvs(dict(resource)))
        scope = resource_spans.scope_spans.add()
        scope.scope.name = "tests"
        for fake in members:
            span = scope.spans.add()
            span.trace_id = bytes.fromhex(fake.trace_id)
            span.span_id = bytes.fromhex(fake.span_id)
            if fake.parent:
                span.parent_span_id = bytes.fromhex(fake.parent)
            span.name = fake.name
            span.kind = fake.kind  # type: ignore[assignment]
            span.start_time_unix_nano = T0_NS + int(fake.start_s * 1e9)
            span.end_time_unix_nano = T0_NS + int(fake.end_s * 1e9)
            span.attributes.extend(_kvs(fake.attributes))
            if fake.error:
                span.status.code = Status.STATUS_CODE_ERROR
            if fake.exception:
                event = span.events.add()
                event.name = "exception"
                event.time_unix_nano = span.end_time_unix_nano
                event.attributes.extend(
                    _kvs(
                        {
                            "exception.type": fake.exception[0],
                            "exception.message": fake.exception[1],
                        }
                    )
                )
    return request


__all__ = [
    "CLIENT",
    "INTERNAL",
    "SERVER",
    "FakeSpan",
    "Span",
    "agent_span",
    "export",
    "model_span",
    "tool_span",
    "trace_id",
]
