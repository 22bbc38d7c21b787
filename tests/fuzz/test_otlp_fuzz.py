"""Hypothesis over ``POST /v1/traces``: generated exports, OTLP/JSON and protobuf, with hostile
strings, huge numbers, deep nesting and bad ids. No input makes a server error, and each span is
applied whole or rejected whole: what is stored is exactly the spans the reply does not reject.

``make test`` runs a short pass (5 x ``BP_FUZZ_EXAMPLES``, default 10, examples per test);
``make fuzz`` a longer one.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from django.test import Client
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from breakers.models import FleetTransition, Incident, Tool
from runs.models import (
    AgentToken,
    FleetBacklog,
    IngestedEvent,
    ModelCall,
    ReportedTransition,
    Run,
    ToolCall,
    Worker,
)
from tests.fleet.support import delete_fleet_keys

pytestmark = pytest.mark.django_db

EXAMPLES = 5 * int(os.environ.get("BP_FUZZ_EXAMPLES", "10"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
T0_NS = 1_796_000_000_000_000_000  # 2026-11-30
UINT64_MAX = 2**64 - 1
JSON, PROTOBUF = "application/json", "application/x-protobuf"
ANSWERS = {200, 400, 413, 415}

# What a careless or hostile client writes where the mapping reads text.
hostile_text = st.one_of(
    st.sampled_from(
        [
            "",
            "w-1",
            "x" * 200,
            "x" * 201,
            "y" * 5000,
            "a\x00b",
            "\ud800",
            "lone \udfff",
            "tab\t",
            "\x7f",
            "é",
            "\U0001f600",
            "invoke_agent",
            "execute_tool ",
        ]
    ),
    st.lists(
        st.one_of(st.characters(), st.sampled_from(["\x00", "\ud800", "\udbff", "\x1b"])),
        max_size=12,
    ).map("".join),
)
huge_int = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([10**30, 2**63, -(2**63) - 1, 2**64, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
)
sane_time = st.integers(T0_NS, T0_NS + 10**12)
timestamp = st.one_of(
    sane_time,
    sane_time,
    sane_time,
    st.sampled_from([0, 2**63, UINT64_MAX, 2**64, 10**30, 16_725_225_600 * 10**9]),
    st.integers(0, 2**65),
)
bad_trace = st.sampled_from(["00" * 16, "zz" * 16, "ab" * 20, "abc", ""])


@dataclass
class Value:
    """An attribute value: ``kind`` is string, int, double, bool or deep (``value`` levels of
    nested arrays)."""

    kind: str
    value: Any


@dataclass
class GenSpan:
    kind: str  # tool, model, agent or other (not a GenAI span: ignored)
    trace: int
    span: int
    resource: int
    start: int
    end: int
    attributes: dict[str, Value] = field(default_factory=dict)
    bad_trace: str | None = None
    times_as_strings: bool = False

    @property
    def name(self) -> str:
        label = self.attributes.get("gen_ai.tool.name") or self.attributes.get("gen_ai.agent.name")
        suffix = label.value if label is not None and label.kind == "string" else "x"
        prefix = {"tool": "execute_tool", "agent": "invoke_agent", "model": "chat"}
        return f"{prefix.get(self.kind, 'GET')} {suffix}"


@dataclass
class GenExport:
    resources: list[dict[str, Value]]
    spans: list[GenSpan]

    @property
    def ignored(self) -> int:
        return sum(span.kind == "other" for span in self.spans)


def text_value() -> st.SearchStrategy[Value]:
    sane = st.sampled_from(["w-1", "research", "web_search", "gpt-4o", "conv-7"])
    return st.one_of(sane, sane, hostile_text).map(lambda text: Value("string", text))


def extra_attributes() -> st.SearchStrategy[dict[str, Value]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "gen_ai.conversation.id": text_value(),
            "vendor.deep": st.sampled_from([1, 15, 16, 17, 60, 120]).map(
                lambda n: Value("deep", n)
            ),
            "vendor.number": huge_int.map(lambda n: Value("int", n)),
            "vendor.double": st.floats().map(lambda n: Value("double", n)),
        },
    )


@st.composite
def exports(draw: st.DrawFn) -> GenExport:
    resources = draw(
        st.lists(
            st.one_of(
                st.just({"service.instance.id": Value("string", "w-good")}),
                st.fixed_dictionaries({"service.instance.id": text_value()}),
                st.fixed_dictionaries({"service.name": text_value()}),
                st.fixed_dictionaries(
                    {"host.name": text_value(), "process.pid": st.just(Value("int", 4242))}
                ),
                st.fixed_dictionaries(
                    {
                        "service.instance.id": st.just(Value("string", "w-ok")),
                        "service.name": text_value(),
                    }
                ),
                st.just({}),
            ),
            min_size=1,
            max_size=3,
        )
    )
    span_ids = itertools.count(1)
    spans: list[GenSpan] = []
    kinds = draw(st.lists(st.sampled_from(["tool", "model", "agent", "other"]), max_size=8))
    agent_traces = itertools.count(100)  # one agent span per trace: one finish per run
    for kind in kinds:
        resource = draw(st.integers(0, len(resources) - 1))
        if kind == "other":  # ignored by the receiver, so its ids and times are sane
            spans.append(GenSpan(kind, 1, next(span_ids), resource, T0_NS, T0_NS + 10**9,
                                 {"http.request.method": Value("string", "GET")}))  # fmt: skip
            continue
        trace = next(agent_traces) if kind == "agent" else draw(st.sampled_from([1, 2, 100, 101]))
        # A third of the spans hostile, so that most exports also carry spans that must land.
        if draw(st.sampled_from([False, False, True])):
            attributes = _kind_attributes(draw, kind) | draw(extra_attributes())
            start, end = draw(timestamp), draw(timestamp)
            wrong_trace = draw(st.none() | bad_trace)
        else:
            attributes = _kind_attributes(draw, kind, sane=True)
            start = draw(sane_time)
            end, wrong_trace = start + draw(st.integers(0, 10**10)), None
        spans.append(
            GenSpan(
                kind, trace, next(span_ids), resource, start, end, attributes,
                bad_trace=wrong_trace, times_as_strings=draw(st.booleans()),
            )
        )  # fmt: skip
    return GenExport(resources, spans)


def _kind_attributes(draw: st.DrawFn, kind: str, *, sane: bool = False) -> dict[str, Value]:
    text = st.just(Value("string", "web_search")) if sane else text_value()
    if kind == "tool":
        return {
            "gen_ai.operation.name": Value("string", "execute_tool"),
            "gen_ai.tool.name": draw(text),
            **draw(st.fixed_dictionaries({}, optional={"error.type": text})),
        }
    if kind == "model":
        return {
            "gen_ai.operation.name": Value("string", "chat"),
            "gen_ai.request.model": draw(text),
            "gen_ai.usage.input_tokens": Value(
                "int", draw(st.integers(0, 10**6) if sane else huge_int)
            ),
            **draw(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "gen_ai.usage.cost": (st.floats(0, 10) if sane else st.floats()).map(
                            lambda n: Value("double", n)
                        )
                    },
                )
            ),
        }
    return {
        "gen_ai.operation.name": Value("string", "invoke_agent"),
        "gen_ai.agent.name": draw(text),
    }


# --- encoding ---------------------------------------------------------------------------------


def _json_value(value: Value) -> dict[str, Any]:
    if value.kind == "deep":
        node: dict[str, Any] = {"stringValue": "bottom"}
        for _ in range(value.value):
            node = {"arrayValue": {"values": [node]}}
        return node
    if value.kind == "int" and isinstance(value.value, int) and value.value % 2:
        return {"intValue": str(value.value)}  # 64-bit integers may be strings in OTLP/JSON
    key = {"string": "stringValue", "int": "intValue", "double": "doubleValue"}[value.kind]
    return {key: value.value}


def _json_attributes(attributes: dict[str, Value]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _json_value(value)} for key, value in attributes.items()]


def _time(span: GenSpan, value: int) -> int | str:
    return str(value) if span.times_as_strings else value


def to_json(export: GenExport) -> bytes:
    resource_spans = []
    for index, resource in enumerate(export.resources):
        spans = [
            {
                "traceId": span.bad_trace if span.bad_trace is not None else f"{span.trace:032x}",
                "spanId": f"{span.span:016x}",
                "name": span.name,
                "kind": 3,
                "startTimeUnixNano": _time(span, span.start),
                "endTimeUnixNano": _time(span, span.end),
                "attributes": _json_attributes(span.attributes),
            }
            for span in export.spans
            if span.resource == index
        ]
        resource_spans.append(
            {
                "resource": {"attributes": _json_attributes(resource)},
                "scopeSpans": [{"spans": spans}],
            }
        )
    # allow_nan: Infinity and NaN as the OTLP/JSON mapping writes them; surrogates stay escaped.
    return json.dumps({"resourceSpans": resource_spans}).encode()


def _proto_text(text: str) -> str:
    # Protobuf strings are UTF-8, which has no lone surrogates: NUL is the hostile stand-in.
    return "".join("\x00" if 0xD800 <= ord(char) <= 0xDFFF else char for char in text)


def _fill(target: AnyValue, value: Value) -> None:
    """Write ``value`` into ``target`` in place: upb copies a message that is appended or
    passed to a constructor, and refuses to copy one nested past its depth limit."""
    if value.kind == "deep":
        for _ in range(value.value):
            target = target.array_value.values.add()
        target.string_value = "bottom"
    elif value.kind == "string":
        target.string_value = _proto_text(value.value)
    elif value.kind == "int" and isinstance(value.value, int) and -(2**63) <= value.value < 2**63:
        target.int_value = value.value
    else:
        try:
            target.double_value = float(value.value)
        except OverflowError:
            target.double_value = float("inf")


def _add_attributes(container: Any, attributes: dict[str, Value]) -> None:
    for key, value in attributes.items():
        _fill(container.add(key=key).value, value)


def _proto_trace(span: GenSpan) -> bytes:
    if span.bad_trace is None:
        return span.trace.to_bytes(16, "big")
    try:
        return bytes.fromhex(span.bad_trace)
    except ValueError:
        return b"\x01\x02\x03"


def to_protobuf(export: GenExport) -> bytes:
    request = ExportTraceServiceRequest()
    for index, resource in enumerate(export.resources):
        resource_spans = request.resource_spans.add()
        _add_attributes(resource_spans.resource.attributes, resource)
        scope = resource_spans.scope_spans.add()
        for gen in (span for span in export.spans if span.resource == index):
            span = scope.spans.add()
            span.trace_id = _proto_trace(gen)
            span.span_id = gen.span.to_bytes(8, "big")
            span.name = _proto_text(gen.name)
            span.kind = 3  # type: ignore[assignment]
            span.start_time_unix_nano = min(gen.start, UINT64_MAX)
            span.end_time_unix_nano = min(gen.end, UINT64_MAX)
            _add_attributes(span.attributes, gen.attributes)
    return request.SerializeToString()


# --- the properties ---------------------------------------------------------------------------


@pytest.fixture
def token(db: None) -> str:
    return AgentToken.issue(name="otlp-fuzz")[1]


def empty(fleet_redis: redis.Redis) -> None:
    """Each example starts from nothing (the ingest commits inside the test's transaction)."""
    for model in (ToolCall, ModelCall, ReportedTransition, IngestedEvent, FleetBacklog, Run,
                  Worker, Incident, FleetTransition, Tool):  # fmt: skip
        model.objects.all().delete()
    delete_fleet_keys(fleet_redis)


def post(token: str, body: bytes, content_type: str) -> tuple[int, int]:
    """(status, rejected spans) for one export."""
    response = Client().post(
        "/v1/traces", body, content_type=content_type,
        headers={"Authorization": f"Bearer {token}"},
    )  # fmt: skip
    if response.status_code != 200:
        return response.status_code, 0
    if content_type == JSON:
        partial = json.loads(response.content).get("partialSuccess") or {}
        return 200, int(partial.get("rejectedSpans", 0))
    return 200, ExportTraceServiceResponse.FromString(
        response.content
    ).partial_success.rejected_spans


def stored() -> dict[str, int]:
    return {
        "tool calls": ToolCall.objects.count(),
        "model calls": ModelCall.objects.count(),
        "finished runs": Run.objects.filter(finished_at__isnull=False).count(),
        "runs": Run.objects.count(),
    }


@pytest.mark.timeout(900)
@FUZZ
@given(export=exports(), encoding=st.sampled_from([JSON, PROTOBUF]))
def test_any_export_is_answered_without_a_server_error_and_each_span_lands_whole_or_not_at_all(
    token: str, fleet_redis: redis.Redis, export: GenExport, encoding: str
) -> None:
    empty(fleet_redis)
    body = to_json(export) if encoding == JSON else to_protobuf(export)
    status, rejected = post(token, body, encoding)
    assert status in ANSWERS
    counts = stored()
    event(f"status {status}, {'some' if rejected else 'no'} spans rejected, "
          f"{'some' if any(counts.values()) else 'nothing'} stored")  # fmt: skip
    if status != 200:
        assert counts == dict.fromkeys(counts, 0)
        return
    accepted = len(export.spans) - export.ignored - rejected
    assert accepted >= 0
    # One row per accepted span: a tool or model call, or the finish of its run (one agent
    # span per run here).
    assert counts["tool calls"] + counts["model calls"] + counts["finished runs"] == accepted
    # A rejected span leaves no trace: no run is made by it alone, none is half-written.
    assert set(Run.objects.values_list("source", flat=True)) <= {"otlp"}
    for run in Run.objects.all():
        assert run.tool_calls + run.model_calls > 0 or run.finished_at is not None
    # Exporters resend what they think was lost: the same answer, nothing counted twice.
    assert post(token, body, encoding) == (status, rejected)
    assert stored() == counts


@pytest.mark.timeout(900)
@FUZZ
@given(
    body=st.one_of(
        st.binary(max_size=300),
        st.builds(
            lambda n: b'{"resourceSpans": ' + b"[" * n + b"]" * n + b"}", st.integers(0, 3000)
        ),
        st.recursive(
            st.none() | st.booleans() | st.floats() | st.integers() | hostile_text,
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(
                    st.sampled_from(
                        [
                            "resourceSpans",
                            "scopeSpans",
                            "spans",
                            "resource",
                            "attributes",
                            "traceId",
                            "spanId",
                            "key",
                            "value",
                            "intValue",
                            "stringValue",
                            "arrayValue",
                            "values",
                            "kvlistValue",
                        ]
                    ),
                    inner,
                    max_size=4,
                )
            ),
            max_leaves=30,
        ).map(lambda document: json.dumps(document).encode()),
    ),
    encoding=st.sampled_from([JSON, PROTOBUF]),
)
def test_any_body_is_answered_200_or_400(
    token: str, fleet_redis: redis.Redis, body: bytes, encoding: str
) -> None:
    empty(fleet_redis)
    status, _ = post(token, body, encoding)
    # 415 only for the empty body, which Django's test client sends without a Content-Type.
    assert status in ({200, 400} if body else {415})
    assert set(Run.objects.values_list("source", flat=True)) <= {"otlp"}
