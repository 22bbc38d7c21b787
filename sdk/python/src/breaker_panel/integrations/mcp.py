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

Ways of taking a tool away (`guard_session(..., way=)`): `remove` (the default: open tools leave
`list_tools()`, for clients that re-list before each model call) or `refuse` (`list_tools()`
keeps every tool, so a tools array an agent builds from it, and the provider's prompt cache on
it, stay the same; a call of an open tool is answered with the notice either way). `restrict`
falls back to `refuse`: MCP has no allowed-tools list. The MCP gateway always refuses too, for
clients that never re-list (docs/adr/0183-refusals-work-without-list-changed.md).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from breaker_panel.classify import ToolFailure
from breaker_panel.client import ControlPlane, Run
from breaker_panel.core import FailureInfo
from breaker_panel.notice import Removal
from breaker_panel.per_call import FleetBreakers, LocalBreakers
from breaker_panel.vocabulary import Way
from breaker_panel.ways import integration_way
from breaker_panel.worker import WorkerBreakers

__all__ = [
    "DEFAULT_RETRYABLE_PATTERNS",
    "FAILURE_TABLE",
    "INVALID_PARAMS",
    "FailureRow",
    "GuardedSession",
    "McpClassifier",
    "guard_session",
    "refusal_result",
    "result_is_error",
    "result_text",
]

# An isError result whose text no row of FAILURE_TABLE decides is the tool's answer (bad
# arguments, no results) unless its text says the service behind it is failing (a 5xx status, a
# timeout, "unavailable", a rate limit) or reads as a crash: an OS or network error, or the text
# Python and JavaScript give their commonest bugs. A crash is retryable: it is what a tool whose
# every call fails looks like when its server passes the exception's text on (mcp 1.x FastMCP,
# the TypeScript SDK), and a deliberate error message rarely reads like one.
DEFAULT_RETRYABLE_PATTERNS: tuple[str, ...] = (
    r"\b5\d\d\b",
    r"time[d\s-]*out",
    r"unavailable",
    r"rate[\s_-]*limit",
    r"too many requests",
    r"\b429\b",
    # the network and the OS
    r"\[Errno \d+\]",
    r"connection (?:refused|reset|aborted|closed)",
    r"\bE(?:CONNREFUSED|CONNRESET|CONNABORTED|TIMEDOUT|PIPE|HOSTUNREACH|NETUNREACH|AI_AGAIN)\b",
    r"fetch failed|socket hang up|server disconnected",
    r"name or service not known|temporary failure in name resolution",
    # Python's commonest bugs, as str(exception) spells them (a KeyError is the bare key)
    r"traceback \(most recent call last\)",
    r"object has no attribute|object is not (?:subscriptable|callable|iterable)",
    r"unsupported operand|division by zero|index out of range|maximum recursion depth",
    r"name '[^']+' is not defined|missing \d+ required positional argument",
    r"unexpected keyword argument",
    r"^'[^']*'$",
    # JavaScript's
    r"cannot read propert(?:y|ies) of (?:undefined|null)|is not a function",
    r"maximum call stack size exceeded|unexpected token .* in json",
)
# JSON-RPC "invalid params": the call's arguments were wrong; saying so is not an outage.
INVALID_PARAMS = -32602
_ERROR_TEXT_CHARS = 500

RETRYABLE, SEMANTIC, BY_PATTERNS = "retryable", "semantic", "by patterns"


@dataclass(frozen=True)
class FailureRow:
    """How one real server reports one kind of failure, and what the classifier counts it as.

    `text` (a regular expression) is matched against an isError result's text; rows without
    one are failures the client sees as an exception or a JSON-RPC error (`error()`). Rows
    with `text` are tried in order, the first match decides; `BY_PATTERNS` checks the part
    the group `message` caught (else the whole text) against the retryable patterns.
    """

    server: str
    failure: str
    received: str
    counted: str
    text: str | None = None


# docs/mcp-gateway.md carries this table; each row was seen on the real server and is tested
# against it (tests/mcp/test_real_servers.py).
FAILURE_TABLE: tuple[FailureRow, ...] = (
    FailureRow(
        "mcp 2.x MCPServer",
        "a crash (any exception but ToolError and MCPError), also nested",
        "isError: exactly `Error executing tool <name>` (a nested crash adds "
        "`: Error executing tool <inner>` or `: Error reading resource <uri>`)",
        RETRYABLE,
        r"^Error executing tool [^\s:]+(?:: Error (?:executing tool [^\s:]+|reading resource "
        r"\S+|creating resource from template \S+))*$",
    ),
    FailureRow(
        "mcp 2.x MCPServer, 1.x FastMCP",
        "arguments that fail validation",
        "isError: `Error executing tool <name>: 1 validation error for <name>Arguments …`",
        SEMANTIC,
        r"^Error executing tool [^\s:]+: \d+ validation errors? for ",
    ),
    FailureRow(
        "TypeScript SDK McpServer",
        "arguments that fail the input schema",
        "isError: `MCP error -32602: Input validation error: …`",
        SEMANTIC,
        r"^MCP error -32602: ",
    ),
    FailureRow(
        "TypeScript SDK McpServer",
        "a thrown McpError (another code)",
        "isError: `MCP error <code>: <message>`",
        RETRYABLE,
        r"^MCP error -?\d+: ",
    ),
    FailureRow(
        "mcp 2.x MCPServer, 1.x FastMCP",
        "2.x: a ToolError; 1.x: any exception (a crash, a ToolError, an McpError)",
        "isError: `Error executing tool <name>: <message>`",
        BY_PATTERNS,
        r"^Error executing tool [^\s:]+: (?P<message>.*)$",
    ),
    FailureRow(
        "TypeScript SDK McpServer, any other server",
        "a thrown Error, an isError result",
        "isError: the message as is",
        BY_PATTERNS,
        r"(?P<message>.*)",
    ),
    FailureRow(
        "mcp 2.x MCPServer",
        "an MCPError raised by a tool",
        "a JSON-RPC error with its code",
        "retryable; semantic for -32602 (invalid params)",
    ),
    FailureRow(
        "streamable HTTP upstream",
        "HTTP 5xx or 429 to the tools/call POST",
        "a JSON-RPC error -32603 `Server returned an error response` (a JSON-RPC error in "
        "the body is used instead)",
        "retryable; semantic for -32602 (invalid params)",
    ),
    FailureRow(
        "streamable HTTP upstream",
        "the connection drops mid-call",
        "a transport error: the call fails",
        RETRYABLE,
    ),
    FailureRow(
        "any upstream",
        "no answer within call_timeout",
        "nothing: the gateway gives up (`no answer from <server> within <n> s`)",
        RETRYABLE,
    ),
    FailureRow(
        "stdio upstream",
        "the process exits mid-call",
        "its stdout closes (`the upstream connection closed`); the gateway restarts it",
        RETRYABLE,
    ),
)
_TEXT_ROWS = tuple(
    (re.compile(row.text, re.S), row.counted) for row in FAILURE_TABLE if row.text is not None
)


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
    error (the arguments were wrong). An isError result is read by FAILURE_TABLE: a crash as a
    real server reports it is retryable, bad arguments semantic, and any other text semantic
    unless it matches one of `retryable_patterns` (case-insensitive regular expressions).
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
        text = result_text(result)
        return ToolFailure(text or "the tool reported an error", retryable=self.retryable(text))

    def retryable(self, text: str) -> bool:
        """Whether an isError result with this text counts against the tool (FAILURE_TABLE)."""
        for pattern, counted in _TEXT_ROWS:
            match = pattern.match(text)
            if match is None:
                continue
            if counted != BY_PATTERNS:
                return counted == RETRYABLE
            message = match.groupdict().get("message") or text
            return not self.empty and self.pattern.search(message) is not None
        return False

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
        way: Way | str = Way.REMOVE,
    ) -> None:
        self.session = session
        self.way = integration_way(way)
        self.classifier = classifier or McpClassifier()
        self.last_failure: FailureInfo | None = None
        self._per_call: LocalBreakers | FleetBreakers | None = None
        if isinstance(breaker, WorkerBreakers):
            self._per_call = LocalBreakers(breaker)
        elif isinstance(breaker, ControlPlane):
            self._per_call = FleetBreakers(breaker, agent=agent, run_per_call=True)
        else:
            self.breaker: _Breaker = breaker

    async def list_tools(self, *args: Any, **kwargs: Any) -> Any:
        result = await self.session.list_tools(*args, **kwargs)
        if self.way is Way.REFUSE:
            return result  # every tool stays listed: its calls are refused in call_tool()
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
    way: Way | str = Way.REMOVE,
) -> GuardedSession:
    """Wrap an MCP client session (1.x or 2.x) so open tools leave `list_tools()` (`way`
    "remove"; "refuse" keeps them listed) and every `call_tool()` is recorded; a call to an
    open tool is refused with the notice, unsent. `agent` names the runs a `ControlPlane`
    reports (one per call)."""
    return GuardedSession(session, breaker, McpClassifier(retryable_patterns), agent=agent, way=way)
