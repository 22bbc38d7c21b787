"""OpenAI Agents SDK integration, with the real `agents` package and its ScriptedModel: offline,
no API key. The traps of issue 12 are each a test: a removed tool the model still calls must not
end the run, and failures are classified from the exception, not the error string."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from breaker_panel import ControlPlane, ToolBreaker, ToolFailure, WorkerBreakers
from breaker_panel.integrations.openai_agents import protect

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class Vendor:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.calls = 0


def make_agent(model: Model, vendor: Vendor) -> Agent[Any]:
    @function_tool
    def web_search(query: str) -> str:
        """Search the web."""
        vendor.calls += 1
        if vendor.error is not None:
            raise vendor.error
        return f"results for {query}"

    @function_tool
    def calculator(expression: str) -> str:
        """Evaluate arithmetic."""
        return "4"

    return Agent(
        name="research", instructions="Be brief.", model=model, tools=[web_search, calculator]
    )


def names(tools: list[Any]) -> list[str]:
    return [tool.name for tool in tools]


def search(n: int) -> list[Any]:
    return [function_call("web_search", {"query": f"q{n}"}, call_id=f"call-{n}")]


def outputs(call_input: Any) -> list[str]:
    return [item["output"] for item in call_input if item.get("type") == "function_call_output"]


def test_an_open_tool_leaves_the_tools_sent_and_a_late_call_is_refused() -> None:
    model = ScriptedModel([search(1), search(2), search(3), [assistant_message("done")]])
    vendor = Vendor(ConnectionError("503 from vendor"))
    breaker = ToolBreaker(threshold=2)
    agent = protect(make_agent(model, vendor), breaker)

    result = Runner.run_sync(agent, "find it")

    assert result.final_output == "done"  # the run was not killed by the refused call
    assert vendor.calls == 2  # the third call never reached the tool
    calls = model.calls
    assert names(calls[1].tools) == ["web_search", "calculator"]
    assert names(calls[2].tools) == ["calculator"]
    assert names(calls[3].tools) == ["calculator"]
    assert calls[1].system_instructions == "Be brief."
    notice = breaker.notice() or ""
    assert "web_search: it keeps failing (last error: ConnectionError: 503 from vendor)" in notice
    assert calls[2].system_instructions == f"Be brief.\n\n{notice}"
    assert outputs(calls[3].input)[-1] == notice  # the refusal is the notice


def test_the_models_bad_arguments_are_semantic_and_never_open_the_tool() -> None:
    steps = [search(n) for n in range(4)] + [[assistant_message("no answer")]]
    model = ScriptedModel(steps)
    vendor = Vendor(ValueError("query must be under 256 characters"))
    breaker = ToolBreaker(threshold=2)
    Runner.run_sync(protect(make_agent(model, vendor), breaker), "find it")
    assert vendor.calls == 4
    assert not breaker.is_open("web_search")
    assert names(model.calls[-1].tools) == ["web_search", "calculator"]
    assert "web_search: 3 calls got no usable answer" in (model.calls[3].system_instructions or "")


def test_the_framework_still_shows_its_own_error_text_to_the_model() -> None:
    model = ScriptedModel([search(1), [assistant_message("sorry")]])
    agent = protect(make_agent(model, Vendor(ToolFailure("503", retryable=True))), ToolBreaker())
    Runner.run_sync(agent, "find it")
    assert outputs(model.calls[1].input) == [
        "An error occurred while running the tool. Please try again."
    ]


def test_the_original_agent_is_left_untouched() -> None:
    model = ScriptedModel([])
    agent = make_agent(model, Vendor())
    protected = protect(agent, ToolBreaker())
    assert agent.model is model and not agent.tools[0].tool_input_guardrails
    assert protected.name == "research" and isinstance(protected, Agent)


def plane() -> ControlPlane:
    return ControlPlane("http://127.0.0.1:9", token="t", worker_id="w1", start=False)


def events(control: ControlPlane) -> list[dict[str, Any]]:
    return control.buffered()


def test_a_control_plane_run_records_tool_calls_model_usage_and_the_finish() -> None:
    control = plane()
    usage = Usage(requests=1, input_tokens=120, output_tokens=7, total_tokens=127)
    model = ScriptedModel([search(1), [assistant_message("done")]], default_usage=usage)
    agent = protect(make_agent(model, Vendor(TimeoutError("read timeout"))), control)
    Runner.run_sync(agent, "find it")
    kinds = [(e["type"], e.get("outcome")) for e in events(control)]
    assert kinds == [
        ("run.started", None),
        ("model.call", None),
        ("tool.call", "retryable"),
        ("model.call", None),
        ("run.finished", None),
    ]
    model_call = events(control)[1]
    assert (model_call["input_tokens"], model_call["output_tokens"]) == (120, 7)
    assert events(control)[2]["error"] == "TimeoutError: read timeout"
    control.close(timeout=0)


class EchoModel(Model):
    """Calls web_search once, then answers; records the tools each invocation was offered."""

    def __init__(self) -> None:
        self.offered: dict[str, list[list[str]]] = {}

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        tools = args[1]
        question = input if isinstance(input, str) else input[0]["content"]
        self.offered.setdefault(question, []).append(names(tools))
        await asyncio.sleep(0)  # let the other invocations interleave
        done = not isinstance(input, str) and outputs(input)
        output = [assistant_message("done")] if done else search(len(self.offered))
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_one_protected_agent_serves_concurrent_invocations_as_separate_runs() -> None:
    control = plane()
    model = EchoModel()
    agent = protect(make_agent(model, Vendor()), control)

    async def main() -> None:
        await asyncio.gather(*(Runner.run(agent, f"question {n}") for n in range(8)))

    asyncio.run(main())
    started = {e["run_id"] for e in events(control) if e["type"] == "run.started"}
    finished = {e["run_id"] for e in events(control) if e["type"] == "run.finished"}
    calls = [e for e in events(control) if e["type"] == "tool.call"]
    assert len(started) == 8 and finished == started
    assert sorted(e["run_id"] for e in calls) == sorted(started)  # one call in each run
    assert all(e["outcome"] == "success" for e in calls)
    control.close(timeout=0)


def test_worker_breakers_share_an_outage_across_invocations() -> None:
    worker = WorkerBreakers(threshold=2)
    vendor = Vendor(ConnectionError("down"))
    model = ScriptedModel(
        [
            search(1),
            [assistant_message("a")],
            search(2),
            [assistant_message("b")],
            [assistant_message("c")],
        ]
    )
    agent = protect(make_agent(model, vendor), worker)
    Runner.run_sync(agent, "first")
    Runner.run_sync(agent, "second")
    Runner.run_sync(agent, "third")
    assert worker.is_open("web_search")
    assert names(model.calls[-1].tools) == ["calculator"]  # the third invocation never saw it
    assert "it keeps failing" in (model.calls[-1].system_instructions or "")
    assert json.dumps(vendor.calls) == "2"


def test_refuse_keeps_the_tools_and_instructions_and_answers_the_open_tools_call() -> None:
    model = ScriptedModel([search(1), search(2), search(3), [assistant_message("done")]])
    vendor = Vendor(ConnectionError("503 from vendor"))
    breaker = ToolBreaker(threshold=2)
    agent = protect(make_agent(model, vendor), breaker, way="refuse")

    result = Runner.run_sync(agent, "find it")

    assert result.final_output == "done"
    assert vendor.calls == 2  # the third call was refused, never run
    # The cached prefix (the tools and the instructions) is the same on every call.
    assert [names(call.tools) for call in model.calls] == [["web_search", "calculator"]] * 4
    assert {call.system_instructions for call in model.calls} == {"Be brief."}
    notice = breaker.notice() or ""
    assert notice and model.calls[2].input[-1] == {"role": "developer", "content": notice}
    assert outputs(model.calls[3].input)[-1] == notice  # the refusal is the notice
    assert model.calls[1].input[-1].get("role") != "developer"  # no notice before it opened


def test_restrict_is_refuse_in_the_agents_sdk_and_an_unknown_way_is_refused() -> None:
    model = ScriptedModel([[assistant_message("done")]])
    agent = protect(make_agent(model, Vendor()), ToolBreaker(), way="restrict")
    assert agent.model.way == "refuse"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="way must be one of"):
        protect(make_agent(model, Vendor()), ToolBreaker(), way="hide")
