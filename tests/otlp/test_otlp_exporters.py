"""Real OpenTelemetry exporters (and one framework's own instrumentation) export to the live
test server, configured as a team would configure them: with the OTEL_EXPORTER_OTLP_* variables."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Status, StatusCode

from breakers.models import Alert, AlertChannel, AlertKind, AlertState, FleetTransition, Tool
from runs.models import AgentToken, ModelCall, Run, ToolCall
from scripts.testing.fake_slack import FakeSlackServer
from scripts.testing.processes import CeleryWorkerProcess
from tests.otlp.exporters import JsonSpanExporter
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent_token(transactional_db: None) -> str:
    return AgentToken.issue(name="otel")[1]


@pytest.fixture
def otel_environment(
    live_server: Any, agent_token: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """The three variables of the README's no-code-change quick start."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", live_server.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{agent_token}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    yield


def provider(exporter: SpanExporter, instance: str, *, batch: bool = False) -> TracerProvider:
    resource = Resource.create({"service.name": "research-agent", "service.instance.id": instance})
    tracer_provider = TracerProvider(resource=resource)
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    tracer_provider.add_span_processor(processor)
    return tracer_provider


def traced_run(tracer_provider: TracerProvider, *, failures: int = 1) -> None:
    """An agent run traced by hand with the GenAI conventions."""
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent research") as agent:
        agent.set_attribute("gen_ai.operation.name", "invoke_agent")
        agent.set_attribute("gen_ai.agent.name", "research")
        with tracer.start_as_current_span("chat gpt-4o") as chat:
            chat.set_attributes({
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 5200,
                "gen_ai.usage.output_tokens": 310,
            })  # fmt: skip
        for _ in range(failures):
            with tracer.start_as_current_span("execute_tool web_search") as tool:
                tool.set_attributes({
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "web_search",
                    "error.type": "TimeoutError",
                })  # fmt: skip
                tool.set_status(Status(StatusCode.ERROR, "vendor timed out"))


def test_the_sdks_protobuf_exporter_configured_by_environment_variables(
    otel_environment: None,
) -> None:
    tracer_provider = provider(OTLPSpanExporter(), "w-proto")
    traced_run(tracer_provider, failures=2)
    tracer_provider.shutdown()

    run = Run.objects.get()
    assert (run.source, run.agent, run.status, run.worker.worker_id) == (
        "otlp", "research", "completed", "w-proto",
    )  # fmt: skip
    assert (run.tool_calls, run.tool_failures, run.model_calls) == (2, 2, 1)
    assert set(ToolCall.objects.values_list("error", flat=True)) == {
        "TimeoutError: vendor timed out"
    }
    assert ModelCall.objects.get().input_tokens == 5200


def test_an_otlp_json_exporter(live_server: Any, agent_token: str) -> None:
    exporter = JsonSpanExporter(
        live_server.url + "/v1/traces", {"Authorization": f"Bearer {agent_token}"}
    )
    tracer_provider = provider(exporter, "w-json")
    traced_run(tracer_provider)
    tracer_provider.shutdown()

    assert {status for status, _ in exporter.replies} == {200}
    run = Run.objects.get()
    assert (run.worker.worker_id, run.status, run.tool_failures) == ("w-json", "completed", 1)
    # The JSON ids arrived as hex and were read as hex: the run id is the exporter's trace id.
    assert len(run.run_id.removeprefix("otlp-")) == 32


class RecordingExporter(OTLPSpanExporter):
    """The SDK's protobuf exporter, keeping each export's result (SUCCESS after a 200)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.results: list[SpanExportResult] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        self.results.append(result)
        return result


def test_a_hostile_span_or_resource_does_not_cost_the_exporter_the_rest_of_its_export(
    live_server: Any, agent_token: str
) -> None:
    # One batch with a NUL in the agent span's conversation id, and one from a worker whose
    # service.instance.id is 300 characters: the first loses that span only, the second is
    # rejected whole; both are answered 200 (partial success), so neither is resent.
    def exporter() -> RecordingExporter:
        return RecordingExporter(
            endpoint=live_server.url + "/v1/traces",
            headers={"Authorization": f"Bearer {agent_token}"},
        )

    good, long_named = exporter(), exporter()
    tracer_provider = provider(good, "w-mixed", batch=True)
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent research") as agent:
        agent.set_attributes({
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "research",
            "gen_ai.conversation.id": "conv\x00-1",
        })  # fmt: skip
        with tracer.start_as_current_span("execute_tool web_search") as tool:
            tool.set_attributes({"gen_ai.operation.name": "execute_tool",
                                 "gen_ai.tool.name": "web_search"})  # fmt: skip
    tracer_provider.shutdown()
    rejected_whole = provider(long_named, "w" * 300, batch=True)
    traced_run(rejected_whole)
    rejected_whole.shutdown()

    assert good.results == [SpanExportResult.SUCCESS]
    assert long_named.results == [SpanExportResult.SUCCESS]
    run = Run.objects.get()
    assert (run.worker.worker_id, run.source, run.status, run.tool_calls) == (
        "w-mixed", "otlp", "running", 1,
    )  # fmt: skip


def test_a_wrong_token_is_refused_and_the_exporter_sees_401(live_server: Any) -> None:
    exporter = JsonSpanExporter(live_server.url + "/v1/traces", {"Authorization": "Bearer nope"})
    tracer_provider = provider(exporter, "w-bad")
    traced_run(tracer_provider)
    tracer_provider.shutdown()
    assert {status for status, _ in exporter.replies} == {401}
    assert not Run.objects.exists()


def pydantic_ai_agent(tracer_provider: TracerProvider, tool_behaviour: list[str]) -> Any:
    """A Pydantic AI agent with its own OpenTelemetry instrumentation and an offline model
    (``FunctionModel``) that calls ``web_search`` once per entry of ``tool_behaviour``."""
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    behaviours = iter(tool_behaviour)
    steps = iter(range(len(tool_behaviour) + 1))

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if next(steps) < len(tool_behaviour):
            return ModelResponse(parts=[ToolCallPart("web_search", {"query": "vendor status"})])
        return ModelResponse(parts=[TextPart("done")])

    settings = InstrumentationSettings(tracer_provider=tracer_provider)
    agent = Agent(
        FunctionModel(model), name="researcher", capabilities=[Instrumentation(settings=settings)]
    )

    @agent.tool_plain(retries=5)
    def web_search(query: str) -> str:
        behaviour = next(behaviours)
        if behaviour == "semantic":
            raise ModelRetry("the query is too vague")
        if behaviour == "timeout":
            raise TimeoutError("search vendor timed out")
        return "results"

    return agent


def test_pydantic_ai_instrumentation_exports_an_offline_run(
    live_server: Any, agent_token: str
) -> None:
    exporter = OTLPSpanExporter(
        endpoint=live_server.url + "/v1/traces", headers={"Authorization": f"Bearer {agent_token}"}
    )
    tracer_provider = provider(exporter, "w-pydantic-ai", batch=True)
    agent = pydantic_ai_agent(tracer_provider, ["semantic", "ok"])
    assert agent.run_sync("Is the vendor up?").output == "done"
    failing = pydantic_ai_agent(tracer_provider, ["timeout"])
    with pytest.raises(TimeoutError):
        failing.run_sync("Is the vendor up?")
    tracer_provider.shutdown()  # flushes the batch processor

    completed, failed = Run.objects.order_by("started_at")
    assert (completed.agent, completed.status, completed.source) == (
        "researcher",
        "completed",
        "otlp",
    )
    assert list(completed.tool_call_rows.order_by("ts").values_list("outcome", flat=True)) == [
        "semantic", "success",
    ]  # fmt: skip
    assert completed.model_calls == 3 and completed.input_tokens > 0
    assert completed.cost_estimated  # FunctionModel reports tokens, no cost, no known price
    assert failed.status == "failed"
    call = failed.tool_call_rows.get()
    assert (call.outcome, call.error) == ("retryable", "TimeoutError: search vendor timed out")


@pytest.mark.celery
def test_two_traced_workers_open_the_fleet_breaker_and_alert_from_otlp_alone(
    live_server: Any,
    transactional_db: None,
    celery_worker: CeleryWorkerProcess,
    slack_server: FakeSlackServer,
) -> None:
    AlertChannel.objects.create(name="oncall", webhook_url=slack_server.webhook_url)
    endpoint = live_server.url + "/v1/traces"

    def exporter(instance: str) -> OTLPSpanExporter:
        # Each traced process with its own token, bound to its instance id: the default
        # quorum counts tokens, so one token shared by both would never open the breaker.
        token = AgentToken.issue(name=f"agent {instance}", worker_id=instance)[1]
        return OTLPSpanExporter(endpoint=endpoint, headers={"Authorization": f"Bearer {token}"})

    first = provider(exporter("w-a"), "w-a")
    second = provider(exporter("w-b"), "w-b")
    # Each tool span is exported when it ends, long before its run's agent span.
    traced_run(first, failures=3)
    traced_run(second, failures=2)
    first.shutdown()
    second.shutdown()

    tool = Tool.objects.get(name="web_search")
    assert tool.state == "open"
    assert FleetTransition.objects.get().reason == "5 consecutive retryable failures from 2 workers"
    wait_for(
        lambda: Alert.objects.filter(kind=AlertKind.OPENED, state=AlertState.SENT).exists(),
        "the opened alert to reach Slack",
    )
    texts = [request.json["blocks"][0]["text"]["text"] for request in slack_server.requests]
    assert texts == ["🔴 Breaker open: web_search"]
