"""OpenAI Agents SDK: `protect(agent, breaker)` returns an agent whose broken tools the model
never sees, and whose calls to them are refused without running them or ending the run.

    agent = protect(Agent(name="research", tools=[web_search, fetch_url]), plane)
    result = await Runner.run(agent, "...")

How, and the traps avoided (docs/adr/0123-openai-agents-sdk-integration-through-an.md):

- The tools are filtered in a `Model` wrapper, never with `FunctionTool.is_enabled`: a tool
  that disappears between the model call and its execution raises `ModelBehaviorError` and
  ends the run. Every tool stays registered; the model just is not offered the open ones.
- The notice is appended to that model call's instructions.
- Ways of taking a tool away (`protect(..., way=)`): `remove` (the default, as above) or
  `refuse`: every tool stays in the tools sent, so the provider's prompt cache holds, the
  notice goes last in that call's input (a `developer` message) instead of the cached
  instructions, and a call of an open tool is refused by the guardrail below. `restrict`
  falls back to `refuse`: the Agents SDK's `ModelSettings.tool_choice` takes no
  `allowed_tools` object. `remove` stays the default because these are framework tool
  objects, not one provider's shape, and the model this agent calls may not cache at all;
  for OpenAI models with caching the replay finds `refuse` cheaper than `remove`
  (docs/benchmarks.md, "Ways of taking a tool away").
- A call the model still makes to an open tool is refused by a tool input guardrail
  (`reject_content`, the notice as the tool's answer).
- Failures are recorded in a `failure_error_function` wrapper, which sees the exception: hooks'
  `on_tool_end` only gets the model-facing error string. Successes in a tool output guardrail.
- Each `Runner.run` is one run, kept on the runner's `RunContextWrapper`. The agent's
  `get_all_tools()`, which the runner awaits at the start of each turn in that turn's task, puts
  it in a context variable the model wrapper and the tools then read, so one protected agent
  serves concurrent invocations.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from breaker_panel.integrations import DidNotEnable
from breaker_panel.integrations._runs import Breaker, Price, RunHandle, now, run_factory
from breaker_panel.vocabulary import Way
from breaker_panel.ways import integration_way

try:
    from agents import Agent, AgentHooks, FunctionTool, Model, ModelResponse
    from agents.models.multi_provider import MultiProvider
    from agents.tool import (
        default_tool_timeout_error_message,
        resolve_function_tool_failure_error_function,
        set_function_tool_failure_error_function,
    )
    from agents.tool_guardrails import (
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolInputGuardrailData,
        ToolOutputGuardrail,
        ToolOutputGuardrailData,
    )
except ImportError as error:  # pragma: no cover - exercised in a venv without the extra
    raise DidNotEnable(
        "the OpenAI Agents SDK is not installed: pip install 'breaker-panel-sdk[openai-agents]'"
    ) from error

__all__ = ["BreakerModel", "protect"]


@dataclasses.dataclass
class _Invocation:
    context: Any  # the runner's RunContextWrapper: one per Runner.run
    handle: RunHandle


_current: contextvars.ContextVar[_Invocation | None] = contextvars.ContextVar(
    "breakers_openai_agents_run", default=None
)
_RECORDED = "_breakers_recorded"  # set on a ToolContext whose failure was already recorded
_STARTED = "_breakers_started"
_INVOCATION = "_breakers_invocation"  # on the runner's RunContextWrapper


class _Guard:
    """What a protected agent shares between its invocations."""

    def __init__(self, start: Callable[[], RunHandle]) -> None:
        self.start = start

    def enter(self, context: Any) -> _Invocation:
        # The runner keeps one RunContextWrapper per Runner.run but may run each turn in a task
        # of its own: the run lives on the wrapper, the variable only carries it through a turn.
        invocation = getattr(context, _INVOCATION, None)
        if invocation is None:
            invocation = _Invocation(context, self.start())
            setattr(context, _INVOCATION, invocation)
        _current.set(invocation)
        return invocation


def _handle() -> RunHandle | None:
    invocation = _current.get()
    return None if invocation is None else invocation.handle


@dataclasses.dataclass
class _ProtectedAgent(Agent[Any]):
    breaker_guard: _Guard | None = dataclasses.field(default=None, kw_only=True, repr=False)

    async def get_all_tools(self, run_context: Any) -> list[Any]:
        # Awaited by the runner in the run's own task, before each model call and before the
        # tools run: the context variable set here is what the model wrapper and tools read.
        if self.breaker_guard is not None:
            self.breaker_guard.enter(run_context)
        return await super().get_all_tools(run_context)


class BreakerModel(Model):
    """Wraps a `Model`: takes open tools away from each call (`way`: remove or refuse), adds the
    notice, records usage."""

    def __init__(self, inner: Model | str | None, *, way: Way | str = Way.REMOVE) -> None:
        self.way = integration_way(way)  # no allowed_tools in ModelSettings
        self._inner = inner
        self._resolved: Model | None = inner if isinstance(inner, Model) else None

    @property
    def inner(self) -> Model:
        if self._resolved is None:  # a model name: resolved as the runner would, on first use
            name = self._inner if isinstance(self._inner, str) else None
            self._resolved = MultiProvider().get_model(name)
        return self._resolved

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        handle = _handle()
        if handle is not None:
            tools, system_instructions, input = _constrain(
                handle, tools, system_instructions, input, self.way
            )
        started = now()
        response = await self.inner.get_response(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            **kwargs,
        )
        if handle is not None:
            usage = response.usage
            handle.record_model_call(
                model=_model_name(self.inner),
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                started=started,
            )
        return response

    async def stream_response(  # type: ignore[override]
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        handle = _handle()
        if handle is not None:
            tools, system_instructions, input = _constrain(
                handle, tools, system_instructions, input, self.way
            )
        started = now()
        async for event in self.inner.stream_response(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            **kwargs,
        ):
            usage = getattr(getattr(event, "response", None), "usage", None)
            if handle is not None and getattr(event, "type", "") == "response.completed":
                handle.record_model_call(
                    model=_model_name(self.inner),
                    input_tokens=getattr(usage, "input_tokens", 0) or 0,
                    output_tokens=getattr(usage, "output_tokens", 0) or 0,
                    started=started,
                )
            yield event

    def get_retry_advice(self, request: Any) -> Any:
        return self.inner.get_retry_advice(request)

    async def close(self) -> None:
        if self._resolved is not None:
            await self._resolved.close()


def _constrain(
    handle: RunHandle, tools: list[Any], instructions: str | None, input: Any, way: Way
) -> tuple[list[Any], str | None, Any]:
    tools = handle.toolset(tools, way).tools
    notice = handle.notice()
    if not notice:
        return tools, instructions, input
    if way is Way.REMOVE:
        return tools, f"{instructions}\n\n{notice}" if instructions else notice, input
    # The instructions and the tools are the cached prefix: the notice goes last instead.
    items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
    return tools, instructions, [*items, {"role": "developer", "content": notice}]


def _model_name(model: Model) -> str:
    return str(getattr(model, "model", "") or type(model).__name__)


# -- tools ---------------------------------------------------------------------------------


def _refuse_open_tools(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    handle, name = _handle(), data.context.tool_name
    if handle is None or not handle.is_open(name):
        return _allow(data)
    handle.record_blocked(name)
    return ToolGuardrailFunctionOutput.reject_content(handle.refusal(name))


def _allow(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    setattr(data.context, _STARTED, now())
    return ToolGuardrailFunctionOutput.allow()


def _record_success(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
    handle = _handle()
    if handle is not None and not getattr(data.context, _RECORDED, False):
        handle.record_result(
            data.context.tool_name,
            data.output,
            arguments=_arguments(data.context),
            started=getattr(data.context, _STARTED, None),
        )
    return ToolGuardrailFunctionOutput.allow()


def _arguments(context: Any) -> dict[str, Any] | None:
    """The call's arguments (a JSON object text in the Agents SDK), for the stale check."""
    try:
        arguments = json.loads(getattr(context, "tool_arguments", None) or "null")
    except ValueError:
        return None
    return arguments if isinstance(arguments, dict) else None


_INPUT: ToolInputGuardrail[Any] = ToolInputGuardrail(
    _refuse_open_tools, name="breakers: refuse open tools"
)
_OUTPUT: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
    _record_success, name="breakers: record successes"
)


def _recording_failures(original: Any) -> Callable[[Any, Exception], Any]:
    async def failure_error_function(context: Any, error: Exception) -> str:
        handle = _handle()
        if handle is not None:
            handle.record_failure(
                context.tool_name, error, started=getattr(context, _STARTED, None)
            )
            setattr(context, _RECORDED, True)
        if original is None:
            raise error  # the tool was set to let exceptions end the run: keep that
        result = original(context, error)
        return await result if inspect.isawaitable(result) else result

    return failure_error_function


def _recording_timeouts(tool: FunctionTool) -> Callable[[Any, Exception], Any]:
    original = tool.timeout_error_function

    async def timeout_error_function(context: Any, error: Exception) -> str:
        handle = _handle()
        if handle is not None:
            handle.record_failure(context.tool_name, TimeoutError(str(error)))
            setattr(context, _RECORDED, True)
        if original is None:
            return default_tool_timeout_error_message(
                tool_name=tool.name, timeout_seconds=tool.timeout_seconds or 0
            )
        result = original(context, error)
        return await result if inspect.isawaitable(result) else result

    return timeout_error_function


def _protect_tool(tool: Any) -> Any:
    if not isinstance(tool, FunctionTool):
        return tool  # hosted and MCP tools are still filtered by name in the model wrapper
    original = resolve_function_tool_failure_error_function(tool)
    copy = dataclasses.replace(
        tool,
        tool_input_guardrails=[_INPUT, *(tool.tool_input_guardrails or [])],
        tool_output_guardrails=[_OUTPUT, *(tool.tool_output_guardrails or [])],
    )
    copy.timeout_error_function = _recording_timeouts(tool)
    set_function_tool_failure_error_function(copy, _recording_failures(original))
    return copy


# -- run hooks -----------------------------------------------------------------------------


class _FinishingHooks(AgentHooks[Any]):
    """Ends the invocation's run with the agent; delegates every hook to the agent's own."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        handle = _handle()
        if handle is not None:
            handle.finish("completed")
        if self.inner is not None:
            await self.inner.on_end(context, agent, output)


def _delegate(name: str) -> Any:
    async def hook(self: _FinishingHooks, *args: Any, **kwargs: Any) -> None:
        if self.inner is not None:
            await getattr(self.inner, name)(*args, **kwargs)

    hook.__name__ = name
    return hook


for _name in (
    "on_start",
    "on_handoff",
    "on_tool_start",
    "on_tool_end",
    "on_llm_start",
    "on_llm_end",
):
    setattr(_FinishingHooks, _name, _delegate(_name))


# -- the one-line wiring -------------------------------------------------------------------


def protect(
    agent: Agent[Any],
    breaker: Breaker,
    *,
    price: Price | None = None,
    way: Way | str = Way.REMOVE,
) -> Agent[Any]:
    """A copy of `agent` whose runs obey `breaker` (a ToolBreaker, WorkerBreakers or
    ControlPlane); `agent` itself is left as it was. `price(model, input_tokens,
    output_tokens)` gives a model call's cost in USD for a ControlPlane (0 without it).
    `way`: `remove` (open tools leave the tools sent) or `refuse` (they stay, so a prompt
    cache holds, and their calls are answered with the notice); `restrict` means `refuse` here.

    Pass no `model=` in the `RunConfig`: it would replace the protected model.
    """
    start = run_factory(breaker, agent=agent.name, price=price)
    values = {
        field.name: getattr(agent, field.name)
        for field in dataclasses.fields(agent)
        if field.init and field.name != "breaker_guard"
    }
    values["tools"] = [_protect_tool(tool) for tool in agent.tools]
    values["model"] = BreakerModel(agent.model, way=way)
    values["hooks"] = _FinishingHooks(agent.hooks)
    return _ProtectedAgent(**values, breaker_guard=_Guard(start))
