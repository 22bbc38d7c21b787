"""Pydantic AI 2.x: `breaker_capabilities(breaker)` for `Agent(..., capabilities=...)`.

    agent = Agent(model, tools=[web_search, fetch_url], capabilities=breaker_capabilities(plane))

The traps of issue 12: 2.x has no `Agent(prepare_tools=...)`, and hiding a tool with the
`PrepareTools` capability makes a later call to it an unknown tool, which uses the tool-retry
budget (two such calls end the run with `UnexpectedModelBehavior`). So the tool stays
registered and is only taken out of each model request (`before_model_request`); a call the
model still makes to it is refused in `before_tool_execute` with `ToolFailed`, which shows the
model the notice without using the retry budget.

Ways of taking a tool away (`breaker_capabilities(..., way=)`): `remove` (the default, as
above) or `refuse`, where every tool stays in each model request (so the tools, the first part
of a provider's cached prefix, stay the same) and a call of an open tool is refused as above.
`restrict` falls back to `refuse`: `ModelRequestParameters` has no allowed-tools list. The
notice stays among the instructions, which Pydantic AI sends as the system prompt: under
`refuse` the cached prefix holds up to the tools and is written again from the system prompt
on, once per run. `remove` stays the default: a capability does not know which provider's
cache, if any, is behind the model (docs/benchmarks.md, "Ways of taking a tool away").

Each run gets its own copy of the capability (`for_run`), holding that run's breakers: one
agent serves concurrent runs. Tool failures are recorded from the exception and then shown to
the model as `ToolFailed` (`handle_errors=True`, the default) so the run goes on and the breaker
can take the tool away; `handle_errors=False` lets them end the run as Pydantic AI would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from breaker_panel.classify import ToolFailure
from breaker_panel.integrations import DidNotEnable
from breaker_panel.integrations._runs import Breaker, Price, RunHandle, now, run_factory
from breaker_panel.vocabulary import Way
from breaker_panel.ways import integration_way

try:
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import (
        ApprovalRequired,
        CallDeferred,
        SkipToolExecution,
        ToolFailed,
        ToolFailedError,
        ToolRetryError,
    )
except ImportError as error:  # pragma: no cover - exercised in a venv without the extra
    raise DidNotEnable(
        "Pydantic AI 2.x is not installed: pip install 'breaker-panel-sdk[pydantic-ai]'"
    ) from error

__all__ = ["BreakerCapability", "breaker_capabilities"]


class BreakerCapability(AbstractCapability[Any]):
    """Circuit breakers for one Pydantic AI agent; see the module docstring."""

    def __init__(
        self,
        start: Callable[[], RunHandle],
        *,
        handle_errors: bool = True,
        handle: RunHandle | None = None,
        way: Way | str = Way.REMOVE,
    ) -> None:
        self._start = start
        self.handle_errors = handle_errors
        self.handle = handle  # None on the agent's own instance: runs get a copy with one
        self.way = integration_way(way)

    async def for_run(self, ctx: RunContext[Any]) -> BreakerCapability:
        return BreakerCapability(
            self._start, handle_errors=self.handle_errors, handle=self._start(), way=self.way
        )

    def get_instructions(self) -> Any:
        handle = self.handle
        if handle is None:
            return None

        def breaker_notice(ctx: RunContext[Any]) -> str | None:
            return handle.notice()

        return breaker_notice

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> Any:
        try:
            result = await handler()
        except BaseException:
            self._finish("failed")
            raise
        self._finish("completed")
        return result

    def _finish(self, status: str) -> None:
        if self.handle is not None:
            self.handle.finish(status)

    # -- the model request ---------------------------------------------------------------

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        if self.handle is None:
            return request_context
        parameters = request_context.model_request_parameters
        tools = self.handle.toolset(parameters.function_tools, self.way).tools
        if len(tools) == len(parameters.function_tools):
            return request_context
        return dataclasses.replace(
            request_context,
            model_request_parameters=dataclasses.replace(parameters, function_tools=tools),
        )

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: Any, response: Any
    ) -> Any:
        if self.handle is not None:
            usage = response.usage
            self.handle.record_model_call(
                model=str(response.model_name or ""),
                input_tokens=int(usage.input_tokens or 0),
                output_tokens=int(usage.output_tokens or 0),
            )
        return response

    # -- tool calls ----------------------------------------------------------------------

    async def before_tool_execute(
        self, ctx: RunContext[Any], *, call: Any, tool_def: Any, args: Any
    ) -> Any:
        handle = self.handle
        if handle is not None and handle.is_open(call.tool_name):
            handle.record_blocked(call.tool_name)
            raise ToolFailed(handle.refusal(call.tool_name))
        return args

    async def wrap_tool_execute(
        self, ctx: RunContext[Any], *, call: Any, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        handle, name = self.handle, call.tool_name
        if handle is None or handle.is_open(name):
            return await handler(args)  # refused in before_tool_execute, recorded there
        started = now()
        try:
            result = await handler(args)
        except (ApprovalRequired, CallDeferred, SkipToolExecution):
            raise  # control flow, not an outcome
        except (ToolRetryError, ToolFailedError) as error:
            # ModelRetry and ToolFailed: the tool itself judged the call, not its health.
            handle.record_failure(name, ToolFailure(str(error), retryable=False), started=started)
            raise
        except Exception as error:  # recorded; handle_errors says whether it ends the run
            info = handle.record_failure(name, error, started=started)
            if not self.handle_errors:
                raise
            raise ToolFailed(info.error) from error
        arguments = args if isinstance(args, dict) else None
        handle.record_result(name, result, arguments=arguments, started=started)
        return result


def breaker_capabilities(
    breaker: Breaker,
    *,
    agent: str = "pydantic-ai-agent",
    price: Price | None = None,
    handle_errors: bool = True,
    way: Way | str = Way.REMOVE,
) -> list[AbstractCapability[Any]]:
    """The capabilities to pass as `Agent(..., capabilities=...)` (with any of your own);
    `way`: `remove` or `refuse` (`restrict` means `refuse` here; see the module docstring)."""
    start = run_factory(breaker, agent=agent, price=price)
    return [BreakerCapability(start, handle_errors=handle_errors, way=way)]
