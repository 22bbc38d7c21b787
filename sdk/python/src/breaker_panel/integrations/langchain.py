"""LangChain v1: `BreakerMiddleware(breaker)` for `create_agent(..., middleware=[...])`.

    agent = create_agent(model, tools=[search, fetch], middleware=[BreakerMiddleware(plane)])

- `wrap_model_call` sends the model `request.override(tools=...)` without the open tools, and
  the notice appended to the system message.
- `wrap_tool_call` refuses a call to an open tool with an error `ToolMessage` (the notice),
  without running it: taking a tool out of `ModelRequest.tools` does not stop `ToolNode`
  running it if the model still calls it (the trap of issue 12).
- Ways of taking a tool away (`BreakerMiddleware(..., way=)`): `remove` (the default, as
  above) or `refuse`: every tool stays in `ModelRequest.tools`, so a provider's prompt cache
  keyed on the tools holds, the notice goes last (a `HumanMessage` after the newest message,
  never into the cached system message), and a call of an open tool is refused as below.
  `restrict` falls back to `refuse`: a `ModelRequest` carries no provider-neutral allowed-tools
  list. `remove` stays the default: a middleware does not know which provider's cache (if any)
  sits behind the chat model; for OpenAI- and Anthropic-shaped models with caching the replay
  finds `refuse` cheaper (docs/benchmarks.md, "Ways of taking a tool away").
- Every tool call's outcome is recorded from the exception itself. An exception is then turned
  into an error `ToolMessage` for the model (`handle_errors=True`, the default), so the run
  goes on and the breaker can take the tool away; `handle_errors=False` re-raises it.
- Each invocation is one run: `before_agent` starts it and keeps its key in the agent state,
  `after_agent` finishes it, so one compiled agent serves concurrent invocations.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired

from breaker_panel.classify import ToolFailure
from breaker_panel.integrations import DidNotEnable
from breaker_panel.integrations._runs import Breaker, Price, RunHandle, now, run_factory
from breaker_panel.vocabulary import Way
from breaker_panel.ways import integration_way

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState
    from langchain.agents.middleware.types import PrivateStateAttr
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    from langgraph.errors import GraphBubbleUp
except ImportError as error:  # pragma: no cover - exercised in a venv without the extra
    raise DidNotEnable(
        "LangChain v1 is not installed: pip install 'breaker-panel-sdk[langchain]'"
    ) from error

__all__ = ["BreakerMiddleware", "BreakerState"]

_RUN_KEY = "breaker_run"
# What ToolNode's default handler shows the model for arguments that fail the tool's schema:
# the model's own mistake, so semantic.
_INVALID_ARGUMENTS = "Error invoking tool"


class BreakerState(AgentState[Any]):
    # mypy does not follow langchain (pyproject.toml), so AgentState is not a TypedDict to it.
    breaker_run: NotRequired[Annotated[str, PrivateStateAttr]]  # type: ignore[valid-type]


class BreakerMiddleware(AgentMiddleware[BreakerState, Any, Any]):
    """Circuit breakers for a `create_agent` agent; see the module docstring."""

    state_schema = BreakerState

    def __init__(
        self,
        breaker: Breaker,
        *,
        agent: str = "langchain-agent",
        price: Price | None = None,
        handle_errors: bool = True,
        way: Way | str = Way.REMOVE,
    ) -> None:
        super().__init__()
        self.way = integration_way(way)
        self._start = run_factory(breaker, agent=agent, price=price)
        self.handle_errors = handle_errors
        self._runs: dict[str, RunHandle] = {}
        self._lock = threading.Lock()
        self._keys = itertools.count(1)

    # -- one run per invocation ----------------------------------------------------------

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        key = f"{id(self):x}-{next(self._keys)}"
        with self._lock:
            self._runs[key] = self._start()
        return {_RUN_KEY: key}

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        with self._lock:
            handle = self._runs.pop(_key(state), None)
        if handle is not None:
            handle.finish("completed")
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)

    def _handle(self, state: Any) -> RunHandle:
        key = _key(state)
        with self._lock:
            handle = self._runs.get(key)
            if handle is None:  # a state from before this middleware was added: a run of its own
                handle = self._runs[key] = self._start()
        return handle

    # -- the model call ------------------------------------------------------------------

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        handle = self._handle(request.state)
        started = now()
        response = handler(_constrain(handle, request, self.way))
        _record_usage(handle, request, response, started)
        return response

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        handle = self._handle(request.state)
        started = now()
        response = await handler(_constrain(handle, request, self.way))
        _record_usage(handle, request, response, started)
        return response

    # -- tool calls ----------------------------------------------------------------------

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        handle, name = self._handle(request.state), request.tool_call["name"]
        if handle.is_open(name):
            return _refuse(handle, request)
        started = now()
        try:
            result = handler(request)
        except GraphBubbleUp:
            raise  # an interrupt, not a failure
        except Exception as error:  # noqa: BLE001 - recorded; handle_errors says if it goes on
            return self._failed(handle, request, error, started)
        _record_result(handle, name, result, started, request.tool_call.get("args"))
        return result

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        handle, name = self._handle(request.state), request.tool_call["name"]
        if handle.is_open(name):
            return _refuse(handle, request)
        started = now()
        try:
            result = await handler(request)
        except GraphBubbleUp:
            raise  # an interrupt, not a failure
        except Exception as error:  # noqa: BLE001 - recorded; handle_errors says if it goes on
            return self._failed(handle, request, error, started)
        _record_result(handle, name, result, started, request.tool_call.get("args"))
        return result

    def _failed(self, handle: RunHandle, request: Any, error: Exception, started: float) -> Any:
        info = handle.record_failure(request.tool_call["name"], error, started=started)
        if not self.handle_errors:
            raise error
        return ToolMessage(
            content=info.error,
            name=request.tool_call["name"],
            tool_call_id=request.tool_call["id"],
            status="error",
        )


def _key(state: Any) -> str:
    key = state.get(_RUN_KEY) if isinstance(state, dict) else getattr(state, _RUN_KEY, None)
    return key if isinstance(key, str) else ""


def _constrain(handle: RunHandle, request: Any, way: Way = Way.REMOVE) -> Any:
    tools = handle.toolset(request.tools, way).tools
    notice = handle.notice()
    if not notice:
        return request.override(tools=tools) if len(tools) != len(request.tools) else request
    if way is Way.REFUSE:
        # The tools and the system message are the cached prefix: the notice goes last.
        return request.override(messages=[*request.messages, HumanMessage(content=notice)])
    return request.override(
        tools=tools, system_message=_with_notice(request.system_message, notice)
    )


def _with_notice(message: SystemMessage | None, notice: str) -> SystemMessage:
    if message is None:
        return SystemMessage(content=notice)
    if isinstance(message.content, str):
        return SystemMessage(
            content=f"{message.content}\n\n{notice}" if message.content else notice
        )
    return SystemMessage(content=[*message.content, {"type": "text", "text": notice}])


def _record_usage(handle: RunHandle, request: Any, response: Any, started: float) -> None:
    messages = getattr(response, "result", None) or []
    usage = next(
        (m.usage_metadata for m in messages if isinstance(m, AIMessage) and m.usage_metadata),
        None,
    )
    model = request.model
    handle.record_model_call(
        model=str(getattr(model, "model_name", None) or getattr(model, "model", None) or ""),
        input_tokens=int(usage.get("input_tokens", 0)) if usage else 0,
        output_tokens=int(usage.get("output_tokens", 0)) if usage else 0,
        started=started,
    )


def _refuse(handle: RunHandle, request: Any) -> ToolMessage:
    name = request.tool_call["name"]
    handle.record_blocked(name)
    return ToolMessage(
        content=handle.refusal(name),
        name=name,
        tool_call_id=request.tool_call["id"],
        status="error",
    )


def _record_result(
    handle: RunHandle, name: str, result: Any, started: float, arguments: Any = None
) -> None:
    if not isinstance(result, ToolMessage):
        handle.record_success(name, started=started)  # a Command: not an answer to check
        return
    if result.status != "error":
        arguments = arguments if isinstance(arguments, dict) else None
        handle.record_result(name, result.content, arguments=arguments, started=started)
        return
    # An error the tool or ToolNode already turned into text: only the text is left.
    text = result.content if isinstance(result.content, str) else str(result.content)
    semantic = text.startswith(_INVALID_ARGUMENTS)
    handle.record_failure(name, ToolFailure(text, retryable=not semantic), started=started)
