"""Spans that follow the GenAI semantic conventions -> the event dicts of ``POST /api/v1/events``.

Pure: no Django, no database. Ids are derived from the trace and span ids, so a span sent again
(in the same export or another) maps to the same event and the ingest counts it once. Spans of
kinds it does not know (HTTP, database, a framework's own) are counted as ignored, not refused.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from breaker_panel.classify import DEGRADED_PREFIX
from breaker_panel.result_checks import ResultChecker, ResultChecks
from runs.otlp.decode import SPAN_KIND_SERVER, STATUS_ERROR, SpanRecord
from runs.schemas import MAX_ID_CHARS, MAX_TS, check_identifier

__all__ = (
    "AgentSpan",
    "MappedExport",
    "MappingConfig",
    "RunFacts",
    "classify_tool_span",
    "map_spans",
    "run_id_for",
    "worker_id_for",
)

MODEL_OPERATIONS = frozenset(
    {"chat", "generate_content", "text_completion", "completion", "embeddings", "responses"}
)
_COST_ATTRIBUTES = ("gen_ai.usage.cost", "operation.cost", "llm.cost.total")
_SPLIT_COST_ATTRIBUTES = ("llm.cost.prompt", "llm.cost.completion")
_INPUT_TOKEN_ATTRIBUTES = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
)
_OUTPUT_TOKEN_ATTRIBUTES = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)
# Parts of the input tokens (OpenTelemetry GenAI semantic conventions; OpenInference's names).
_CACHE_READ_ATTRIBUTES = (
    "gen_ai.usage.cache_read.input_tokens",
    "llm.token_count.prompt_details.cache_read",
)
_CACHE_WRITE_ATTRIBUTES = (
    "gen_ai.usage.cache_creation.input_tokens",
    "llm.token_count.prompt_details.cache_write",
)
_MAX_ERROR_CHARS = 2000
# The events API's bound on times (runs.schemas); its lower bound, 1970, is a uint64's own.
_MAX_TS_NS = int(MAX_TS.timestamp()) * 1_000_000_000


@dataclass(frozen=True, slots=True)
class MappingConfig:
    """What the operator can change (settings ``OTLP_*``, docs/api.md)."""

    # error.type / exception.type values (full or last dotted part) that mean "the call was
    # rejected for its arguments": semantic, never counted towards a breaker.
    semantic_error_types: frozenset[str] = frozenset(
        {"ModelRetry", "ToolRetryError", "ValidationError", "invalid_arguments"}
    )
    semantic_http_statuses: frozenset[int] = frozenset({400, 404, 409, 422})
    # JSON-RPC "invalid params" from an MCP server.
    semantic_jsonrpc_codes: frozenset[int] = frozenset({-32602})
    # MCP ``tools/call`` spans made by the agent (client side) count as tool calls.
    mcp_tool_spans: bool = True
    # The SDK's result checks on the result a tool span records (None: off). No schema (a span
    # does not carry one) and no stale check (spans of every agent arrive interleaved).
    result_checks: ResultChecker | None = None


# Where instrumentation records a tool's answer: the GenAI semantic conventions (opt-in
# content capture), then OpenInference.
RESULT_ATTRIBUTES = ("gen_ai.tool.call.result", "output.value")


def span_result_checks(*, healthy_empty: Iterable[str] = ()) -> ResultChecker:
    """The checks OTLP applies: every built-in but schema and stale; `healthy_empty` tools off."""
    off = ResultChecks(empty_is_healthy=True)
    return ResultChecker(dict.fromkeys(healthy_empty, off), default=ResultChecks(stale_after=0))


@dataclass(frozen=True, slots=True)
class AgentSpan:
    name: str
    start_ns: int
    end_ns: int
    failed: bool


@dataclass(slots=True)
class RunFacts:
    """What the ingest events cannot say about a run, applied after them (runs/otlp/receiver)."""

    run_id: str
    worker_id: str
    first_start_ns: int
    agent: AgentSpan | None = None  # the earliest-starting invoke_agent span in this export
    cost_estimated: bool = False
    conversation_id: str = ""
    started: dict[str, Any] = field(default_factory=dict)  # this export's run.started event
    finished: dict[str, Any] = field(default_factory=dict)  # and its run.finished, if any


@dataclass(slots=True)
class MappedExport:
    batches: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # worker -> events
    span_of_event: dict[str, int] = field(default_factory=dict)  # event id -> span position
    runs: dict[tuple[str, str], RunFacts] = field(default_factory=dict)  # (worker, run id)
    ignored: int = 0
    rejected: dict[int, str] = field(default_factory=dict)  # span position -> reason


def run_id_for(span: SpanRecord) -> str:
    return f"otlp-{span.trace_id}"


def worker_id_for(resource: dict[str, Any]) -> str:
    """``service.instance.id``, else ``host.name:process.pid``, else the service name."""
    return _worker(resource)[0]


def _worker(resource: dict[str, Any]) -> tuple[str, str]:
    """(worker id, the resource attributes it was taken from)."""
    instance = resource.get("service.instance.id")
    if isinstance(instance, str) and instance:
        return instance, "service.instance.id"
    host, pid = resource.get("host.name"), resource.get("process.pid")
    if isinstance(host, str) and host and isinstance(pid, int | str) and not isinstance(pid, bool):
        return f"{host}:{pid}", "host.name:process.pid"
    service = resource.get("service.name")
    if isinstance(service, str) and service:
        return service, "service.name"
    return "unknown_service", "service.name"


def map_spans(
    spans: Iterable[SpanRecord], *, config: MappingConfig, refused: Mapping[int, str] | None = None
) -> MappedExport:
    """Map each span to its event; a span that cannot be stored is rejected alone with its
    reason (``refused``: spans the caller already rejected, by position, with their reasons)."""
    out = MappedExport()
    seen: set[tuple[str, str]] = set()
    for position, span in enumerate(spans):
        kind = _span_kind(span, config)
        if kind is None:
            out.ignored += 1
            continue
        reason = refused.get(position) if refused else None
        if reason is None:
            reason = _resource_problem(span.resource) or _span_problem(span, kind)
        if reason is not None:
            out.rejected[position] = reason
            continue
        if (span.trace_id, span.span_id) in seen:
            continue  # the same span twice in one export (a retrying proxy): apply it once
        seen.add((span.trace_id, span.span_id))
        worker_id = worker_id_for(span.resource)
        run_id = run_id_for(span)
        facts = _facts(out, span, run_id=run_id, worker_id=worker_id)
        if kind == "agent":
            finished = _run_finished(span, run_id)
            if not _note_agent(facts, span):
                continue  # a later-starting (inner) agent span of a run already in this export
            if facts.finished:
                facts.finished.update(finished)  # one run.finished per run and export
                continue
            event = facts.finished = finished
        elif kind == "tool":
            event = _tool_call(span, run_id, config)
        else:
            event, estimated = _model_call(span, run_id)
            facts.cost_estimated |= estimated
        out.batches[worker_id].append(event)
        out.span_of_event[event["id"]] = position
    return out


def _span_kind(span: SpanRecord, config: MappingConfig) -> str | None:
    attributes = span.attributes
    mcp_method = attributes.get("mcp.method.name")
    if mcp_method is not None:
        # MCP spans exist on both sides of a call; the agent's (client) side is the tool call.
        client_side = span.kind != SPAN_KIND_SERVER
        return (
            "tool" if mcp_method == "tools/call" and client_side and config.mcp_tool_spans else None
        )
    operation = attributes.get("gen_ai.operation.name")
    openinference = attributes.get("openinference.span.kind")
    if operation == "execute_tool" or openinference == "TOOL":
        return "tool"
    if operation == "invoke_agent" or openinference == "AGENT":
        return "agent"
    if operation in MODEL_OPERATIONS or openinference == "LLM":
        return "model"
    return None


def _text_problem(value: str, *, min_length: int = 0) -> str | None:
    """Why an identifier cannot be stored, by the events API's rule (``runs.schemas``)."""
    if not min_length <= len(value) <= MAX_ID_CHARS:
        return f"must be {min_length}-{MAX_ID_CHARS} characters long"
    try:
        check_identifier(value)
    except ValueError as exc:
        return str(exc)
    return None


def _resource_problem(resource: dict[str, Any]) -> str | None:
    """The resource names the worker and, until an agent span does, the run: a worker id or
    service name the ingest cannot store rejects every span of the resource."""
    worker_id, source = _worker(resource)
    if problem := _text_problem(worker_id, min_length=1):
        return f"the worker id (resource {source}) {problem}"
    service = resource.get("service.name")
    if isinstance(service, str) and (problem := _text_problem(service[:MAX_ID_CHARS])):
        return f"resource service.name {problem}"
    return None


def _span_problem(span: SpanRecord, kind: str) -> str | None:
    """What of a span would reach the run itself (its start and end, the agent's name, the
    conversation id) and cannot be stored; the events' own fields are the ingest's to check."""
    for name, unix_ns in (("startTimeUnixNano", span.start_ns), ("endTimeUnixNano", span.end_ns)):
        if unix_ns >= _MAX_TS_NS:
            return f"{name} must be before {MAX_TS:%Y-%m-%d} (UTC)"
    conversation = span.attributes.get("gen_ai.conversation.id")
    if isinstance(conversation, str) and (problem := _text_problem(conversation[:MAX_ID_CHARS])):
        return f"gen_ai.conversation.id {problem}"
    if kind == "agent":
        name, source = _agent_name(span)
        if problem := _text_problem(name):
            return f"{source} {problem}"
    return None


def _facts(out: MappedExport, span: SpanRecord, *, run_id: str, worker_id: str) -> RunFacts:
    batch = out.batches.setdefault(worker_id, [])
    # Runs are per worker (ids are scoped by token and worker): a trace whose spans come from
    # two workers makes a run on each.
    facts = out.runs.get((worker_id, run_id))
    if facts is None:
        service = span.resource.get("service.name")
        agent = service if isinstance(service, str) and service else "unknown_service"
        # The run is created by whichever of its spans comes first
        # (docs/adr/0109-one-run-per-trace-created-lazily.md); its start is corrected afterwards
        # when an earlier span arrives.
        started = {"id": f"{run_id}-run", "type": "run.started", "ts": _iso(span.start_ns),
                   "run_id": run_id, "agent": agent[:200]}  # fmt: skip
        batch.append(started)
        out.span_of_event[started["id"]] = -1
        facts = RunFacts(run_id, worker_id, span.start_ns, started=started)
        out.runs[worker_id, run_id] = facts
    elif span.start_ns < facts.first_start_ns:
        facts.first_start_ns = span.start_ns
        facts.started["ts"] = _iso(span.start_ns)
    conversation = span.attributes.get("gen_ai.conversation.id")
    if isinstance(conversation, str) and conversation and not facts.conversation_id:
        facts.conversation_id = conversation[:200]
    return facts


def _agent_name(span: SpanRecord) -> tuple[str, str]:
    """(the run's agent name from an agent span, where it was taken from)."""
    name = span.attributes.get("gen_ai.agent.name")
    if isinstance(name, str) and name:
        return name[:MAX_ID_CHARS], "gen_ai.agent.name"
    name = span.name.removeprefix("invoke_agent").strip() or "agent"
    return name[:MAX_ID_CHARS], "the span name"


def _note_agent(facts: RunFacts, span: SpanRecord) -> bool:
    """Keep the earliest-starting agent span of the run (the outermost); True if it is this."""
    agent = AgentSpan(_agent_name(span)[0], span.start_ns, span.end_ns, _failed(span))
    if facts.agent is None or agent.start_ns < facts.agent.start_ns:
        facts.agent = agent
        return True
    return False


def _run_finished(span: SpanRecord, run_id: str) -> dict[str, Any]:
    # One id per run: a trace with several agent spans finishes its run once; which of them
    # decides the run's end and status is settled afterwards (the earliest-starting one).
    return {
        "id": f"{run_id}-end",
        "type": "run.finished",
        "ts": _iso(span.end_ns),
        "run_id": run_id,
        "status": "failed" if _failed(span) else "completed",
    }


def _tool_call(span: SpanRecord, run_id: str, config: MappingConfig) -> dict[str, Any]:
    outcome, error = classify_tool_span(span, config)
    return {
        "id": f"{run_id}-{span.span_id}",
        "type": "tool.call",
        "ts": _iso(span.end_ns),
        "run_id": run_id,
        "tool": _tool_name(span),
        "outcome": outcome,
        "attempts": 1,
        "duration_ms": _duration_ms(span),
        "error": error,
    }


def _tool_name(span: SpanRecord) -> str:
    for key in ("gen_ai.tool.name", "tool.name"):
        value = span.attributes.get(key)
        if isinstance(value, str) and value:
            return value
    for prefix in ("execute_tool ", "tools/call "):
        if span.name.startswith(prefix):
            return span.name.removeprefix(prefix)
    return span.name


def _failed(span: SpanRecord) -> bool:
    return span.status_code == STATUS_ERROR or bool(span.attributes.get("error.type"))


def classify_tool_span(span: SpanRecord, config: MappingConfig) -> tuple[str, str]:
    """(outcome, error text) with the SDK's rule: a failure is retryable unless it says the call
    was rejected for its arguments (configurable types and statuses), which is semantic."""
    if not _failed(span):
        return _checked_result(span, config)
    error_type = str(span.attributes.get("error.type") or "")
    names = {error_type, span.exception_type}
    names |= {name.rsplit(".", 1)[-1] for name in names}
    names.discard("")
    status = span.attributes.get("http.response.status_code")
    jsonrpc = span.attributes.get(
        "rpc.jsonrpc.error_code", span.attributes.get("jsonrpc.error.code")
    )
    semantic = (
        bool(names & config.semantic_error_types)
        or (isinstance(status, int) and status in config.semantic_http_statuses)
        or (isinstance(jsonrpc, int) and jsonrpc in config.semantic_jsonrpc_codes)
    )
    label = span.exception_type or error_type or "error"
    message = span.exception_message or span.status_message
    text = f"{label}: {message}" if message else label
    return ("semantic" if semantic else "retryable"), text[:_MAX_ERROR_CHARS]


def _checked_result(span: SpanRecord, config: MappingConfig) -> tuple[str, str]:
    """A span that did not fail: `degraded` if its recorded result fails a check, else success.
    A span that records no result is a success: nothing to check."""
    if config.result_checks is None:
        return "success", ""
    attributes = span.attributes
    result = next((attributes[k] for k in RESULT_ATTRIBUTES if k in attributes), None)
    if result is None:
        return "success", ""
    verdict = config.result_checks.check(_tool_name(span), result)
    failure = verdict.failure()
    if failure is None:
        return "success", ""
    return str(failure.outcome), (DEGRADED_PREFIX + failure.message)[:_MAX_ERROR_CHARS]


def _model_call(span: SpanRecord, run_id: str) -> tuple[dict[str, Any], bool]:
    """The span's model.call event. Without a reported cost, the event carries none: the ingest
    prices its tokens (cache reads and writes apart) with the genai-prices table, or stores the
    price as unknown when the counts are absent or wrong or the model is not in the table."""
    attributes = span.attributes
    model = _first_str(
        attributes, ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
    )
    provider = _first_str(attributes, ("gen_ai.provider.name", "gen_ai.system", "llm.provider"))
    cost = _reported_cost(attributes)
    event = {
        "id": f"{run_id}-{span.span_id}",
        "type": "model.call",
        "ts": _iso(span.end_ns),
        "run_id": run_id,
        "model": model[:200],
        "provider": provider[:200],
        "input_tokens": _first_count(attributes, _INPUT_TOKEN_ATTRIBUTES),
        "output_tokens": _first_count(attributes, _OUTPUT_TOKEN_ATTRIBUTES),
        "cache_read_tokens": _first_count(attributes, _CACHE_READ_ATTRIBUTES),
        "cache_write_tokens": _first_count(attributes, _CACHE_WRITE_ATTRIBUTES),
        "cost_usd": None if cost is None else round(cost, 6),
        "duration_ms": _duration_ms(span),
    }
    return event, cost is None


def _reported_cost(attributes: dict[str, Any]) -> float | None:
    for key in _COST_ATTRIBUTES:
        if (value := _number(attributes.get(key))) is not None:
            return value
    parts = [_number(attributes.get(key)) for key in _SPLIT_COST_ATTRIBUTES]
    if any(part is not None for part in parts):
        return sum(part or 0.0 for part in parts)
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _first_str(attributes: dict[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _first_count(attributes: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    """The first of ``keys`` the span has, as sent (a negative or absurd count is the ingest's
    to mark); None when it has none, or one that is not a whole number."""
    for key in keys:
        value = attributes.get(key)
        if value is None:
            continue
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None


def _duration_ms(span: SpanRecord) -> int:
    return max(0, (span.end_ns - span.start_ns) // 1_000_000)


def _iso(unix_ns: int) -> str:
    seconds, nanos = divmod(unix_ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=nanos // 1000).isoformat()
