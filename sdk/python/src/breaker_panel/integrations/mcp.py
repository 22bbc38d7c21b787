"""MCP client integration: `guard_session(session, breaker)` and the MCP failure classifier.

    session = guard_session(client_session, breaker)
    tools = (await session.list_tools()).tools          # open tools left out
    result = await session.call_tool("web_search", {"q": "…"})   # outcome recorded

`breaker` is a run's breakers (a `ToolBreaker`, a `RunBreakers`, a ControlPlane `Run`): the
session is part of that run. Or the worker's (`WorkerBreakers`) or a `ControlPlane`: then each
`call_tool()` is a run of its own, as in the gateway, so a tool comes back after its trial.

Works with `mcp` 1.x (`ClientSession`, `isError`) and 2.x (`ClientSession` or `mcp.Client`,
`is_error`): results and errors are read by duck typing, and `mcp` itself is imported only to
build a refusal. The gateway (`breaker_panel.mcp_gateway`) classifies with the same rules.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from breaker_panel.classify import ToolFailure
from breaker_panel.client import ControlPlane, Run
from breaker_panel.core import FailureInfo
from breaker_panel.notice import Removal
from breaker_panel.per_call import FleetBreakers, LocalBreakers
from breaker_panel.worker import WorkerBreakers

__all__ = [
    "DEFAULT_RETRYABLE_PATTERNS",
    "INVALID_PARAMS",
    "GuardedSession",
    "McpClassifier",
    "guard_session",
    "refusal_result",
    "result_is_error",
    "result_text",
]

# An isError result is the tool's answer (bad arguments, no results) unless its text says the
# service behind it is failing: a 5xx status, a timeout, "unavailable", a rate limit.
DEFAULT_RETRYABLE_PATTERNS: tuple[str, ...] = (
    r"\b5\d\d\b",
    r"time[d\s-]*out",
    r"unavailable",
    r"rate[\s_-]*limit",
    r"too many requests",
    r"\b429\b",
)
# JSON-RPC "invalid params": the call's arguments were wrong; saying so is not an outage.
INVALID_PARAMS = -32602
_ERROR_TEXT_CHARS = 500


class _Breaker(Protocol):
    def available(self, tools: Iterable[Any]) -> list[Any]: ...
    def notice(self) -> str | None: ...
    def removals(self) -> Mapping[str, Removal]: ...
    def record_success(self, name: str) -> None: ...
    def record_failure(self, name: str, failure: BaseException | str | None = None) -> Any: ...


def result_is_error(result: Any) -> bool:
    """`is_error` (mcp 2.x) or `isError` (1.x) of a CallToolResult, or of its JSON dict."""
    if isinstance(result, dict):
        return bool(result.get("isError", result.get("is_error", False)))
    flag = getattr(result, "is_error", None)
    if flag is None:
        flag = getattr(result, "isError", False)
    return bool(flag)


def result_text(result: Any, limit: int = _ERROR_TEXT_CHARS) -> str:
    """The text blocks of a CallToolResult, joined and clipped (for the error and the patterns)."""
    content = result.get("content") if isinstance(result, dict) else getattr(result, "content", ())
    parts = []
    for block in content or ():
        text = block.get("text") if isinstance(block, dict) else getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
    joined = " ".join(" ".join(parts).split())
    return joined[:limit]


def _error_code(error: BaseException) -> int | None:
    """The JSON-RPC code of an MCPError (2.x) or McpError (1.x), found by duck typing."""
    data = getattr(error, "error", None)
    code = getattr(data, "code", None)
    if code is None:
        code = getattr(error, "code", None)
    return code if isinstance(code, int) and not isinstance(code, bool) else None


class McpClassifier:
    """Turns an MCP call's outcome into None (success) or a `ToolFailure`.

    Transport and protocol errors and timeouts are retryable, except a JSON-RPC invalid-params
    error (the arguments were wrong). An isError result is semantic unless its text matches one
    of `retryable_patterns` (case-insensitive regular expressions).
    """

    def __init__(self, retryable_patterns: Sequence[str] = DEFAULT_RETRYABLE_PATTERNS) -> None:
        try:
            self.pattern = re.compile("|".join(f"(?:{p})" for p in retryable_patterns), re.I)
        except re.error as exc:
            raise ValueError(f"retryable_patterns: not a regular expression: {exc}") from exc
        self.empty = not retryable_patterns

    def result(self, result: Any) -> ToolFailure | None:
        if not result_is_error(result):
            return None
        text = result_text(result) or "the tool reported an error"
        retryable = not self.empty and self.pattern.search(text) is not None
        return ToolFailure(text, retryable=retryable)

    def error(self, error: BaseException) -> ToolFailure:
        if isinstance(error, ToolFailure):
            return error
        text = f"{type(error).__name__}: {error}"[:_ERROR_TEXT_CHARS]
        return ToolFailure(text, retryable=_error_code(error) != INVALID_PARAMS)


def _is_open(breaker: Any, name: str) -> bool:
    # is_open() offers the tool to the run, which then hears of other scopes' removals of it.
    if isinstance(breaker, Run):
        return breaker.breakers.is_open(name)
    is_open = getattr(breaker, "is_open", None)
    return bool(is_open(name)) if is_open is not None else name in breaker.removals()


def refusal_result(text: str) -> Any:
    """An isError CallToolResult carrying `text`, in the installed `mcp`'s own type."""
    from mcp.types import CallToolResult  # the caller already uses mcp

    # By alias: "isError" validates on 1.x (field name) and on 2.x (alias of is_error).
    return CallToolResult.model_validate(
        {"content": [{"type": "text", "text": text}], "isError": True}
    )


class GuardedSession:
    """A client session whose tool list follows the breaker; everything else passes through."""

    def __init__(
        self,
        session: Any,
        breaker: _Breaker | WorkerBreakers | ControlPlane,
        classifier: McpClassifier | None = None,
        *,
        agent: str = "mcp-client",
    ) -> None:
        self.session = session
        self.classifier = classifier or McpClassifier()
        self.last_failure: FailureInfo | None = None
        self._per_call: LocalBreakers | FleetBreakers | None = None
        if isinstance(breaker, WorkerBreakers):
            self._per_call = LocalBreakers(breaker)
        elif isinstance(breaker, ControlPlane):
            self._per_call = FleetBreakers(breaker, agent=agent)
        else:
            self.breaker: _Breaker = breaker

    async def list_tools(self, *args: Any, **kwargs: Any) -> Any:
        result = await self.session.list_tools(*args, **kwargs)
        if self._per_call is not None:
            offered = self._per_call.offered(tool.name for tool in result.tools)
            tools = [tool for tool in result.tools if tool.name in offered]
        else:
            tools = self.breaker.available(result.tools)
        return result.model_copy(update={"tools": tools})

    async def call_tool(self, name: str, arguments: Any = None, *args: Any, **kwargs: Any) -> Any:
        if self._per_call is not None:
            return await self._call_as_run(self._per_call, name, arguments, *args, **kwargs)
        if _is_open(self.breaker, name):
            if isinstance(self.breaker, Run):
                self.breaker.record_blocked(name)  # a ControlPlane run reports the refusal
            return refusal_result(self.breaker.notice() or f"{name} is unavailable right now.")
        started = time.perf_counter()
        try:
            result = await self.session.call_tool(name, arguments, *args, **kwargs)
        except Exception as exc:  # classified and re-raised: the caller sees the same error
            self._record(name, self.classifier.error(exc), started)
            raise
        self._record(name, self.classifier.result(result), started)
        return result

    async def _call_as_run(
        self, breakers: Any, name: str, arguments: Any, *args: Any, **kwargs: Any
    ) -> Any:
        record = breakers.begin(name)
        if record.refused:
            return refusal_result(record.notice or f"{name} is unavailable right now.")
        finished = False
        try:
            try:
                result = await self.session.call_tool(name, arguments, *args, **kwargs)
            except Exception as exc:  # classified and re-raised: the caller sees the same error
                record.finish(self.classifier.error(exc))
                finished = True
                raise
            record.finish(self.classifier.result(result))
            finished = True
            return result
        finally:
            if not finished:  # cancelled: the call says nothing about the tool
                record.abandon()

    def _record(self, name: str, failure: ToolFailure | None, started: float) -> None:
        breaker = self.breaker
        if isinstance(breaker, Run):  # a ControlPlane run also reports the call's duration
            duration_ms = int((time.perf_counter() - started) * 1000)
            if failure is None:
                breaker.record_success(name, duration_ms=duration_ms)
            else:
                self.last_failure = breaker.record_failure(name, failure, duration_ms=duration_ms)
        elif failure is None:
            breaker.record_success(name)
        else:
            self.last_failure = breaker.record_failure(name, failure)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def guard_session(
    session: Any,
    breaker: _Breaker | WorkerBreakers | ControlPlane,
    *,
    retryable_patterns: Sequence[str] = DEFAULT_RETRYABLE_PATTERNS,
    agent: str = "mcp-client",
) -> GuardedSession:
    """Wrap an MCP client session (1.x or 2.x) so open tools leave `list_tools()` and every
    `call_tool()` is recorded; a call to an open tool is refused with the notice, unsent.
    `agent` names the runs a `ControlPlane` reports (one per call)."""
    return GuardedSession(session, breaker, McpClassifier(retryable_patterns), agent=agent)
