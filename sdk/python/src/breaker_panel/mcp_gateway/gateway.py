"""The gateway: upstream MCP servers behind one MCP server whose tool list follows the breaker.

Every `tools/call` goes through the breaker: an open tool is answered at once with an isError
result carrying the notice, anything else is relayed to its upstream as plain JSON-RPC (see
passthrough.py) and its outcome classified and recorded. After each call, each fleet sync and
every `check_interval`, the offered set is computed again; when it changed, every client
session is sent `notifications/tools/list_changed`. Under `way: refuse` an open tool stays in
`tools/list` unchanged (a client's prompt cache holds) and only its calls are refused. A
half-open tool that no client calls gets its configured probe as its trial (probe.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import unicodedata
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from breaker_panel.mcp_gateway import require_mcp

require_mcp()  # before the mcp imports: mcp 1.x would fail them with a less helpful error

import mcp.types as types  # noqa: E402
from mcp.server import Server  # noqa: E402
from mcp.server.lowlevel.server import NotificationOptions  # noqa: E402
from mcp.server.models import InitializationOptions  # noqa: E402
from mcp.server.session import ServerSession  # noqa: E402
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # noqa: E402

from breaker_panel.core import DegradedResult, ToolFailure  # noqa: E402
from breaker_panel.integrations.mcp import McpClassifier  # noqa: E402
from breaker_panel.mcp_gateway.checks import GatewayChecks  # noqa: E402
from breaker_panel.mcp_gateway.config import GatewayConfig  # noqa: E402
from breaker_panel.mcp_gateway.passthrough import (  # noqa: E402
    StdioFront,
    UnknownTool,
    malformed,
)
from breaker_panel.mcp_gateway.probe import Prober  # noqa: E402
from breaker_panel.mcp_gateway.upstream import Upstream  # noqa: E402
from breaker_panel.per_call import PerCallBreakers  # noqa: E402
from breaker_panel.vocabulary import Way  # noqa: E402

__all__ = ["Gateway", "Upstream"]  # Upstream: from upstream.py, where it lives

logger = logging.getLogger("breaker_panel.mcp_gateway")

_NOTIFY_TIMEOUT = 5.0  # a client that stops reading must not hold up the others
STDIO_SESSION = "stdio"  # the one client of a stdio gateway: the process is its session
# What a 2026-07-28 client (no session) may send to group its calls into one run.
CONVERSATION_META = "io.breakerpanel/conversation"
CONVERSATION_HEADER = "x-conversation-id"
# Benchmarks only: a file to write the gateway's own time per stdio fast-path call into, at exit.
TIMINGS_ENV = "BREAKER_MCP_GATEWAY_TIMINGS"


def _error_result(text: str) -> dict[str, Any]:
    """An isError CallToolResult as JSON (what a refusal or a failed call answers)."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


class _GatewayServer(Server[Any]):
    # The streamable HTTP manager asks for default options: say that tools/list changes.
    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class Gateway:
    """Fronts `config.servers`; `breakers` decides what is offered and what may be called."""

    def __init__(
        self, config: GatewayConfig, breakers: PerCallBreakers, *, passthrough: bool = True
    ) -> None:
        self.config = config
        self.breakers = breakers
        # False: every tools/call through the SDK's models on both hops (the slower path the
        # passthrough replaced; kept to compare with, and as a way out).
        self.passthrough = passthrough
        self.classifier = McpClassifier(config.breaker.retryable_patterns)
        self.checks = GatewayChecks(config.checks)
        self.upstreams = [
            Upstream(
                c,
                on_tools=self._tools_changed,
                passthrough=passthrough,
                health_interval=config.health_interval,
                health_timeout=config.health_timeout,
                connect_timeout=config.connect_timeout,
            )
            for c in config.servers
        ]
        self.catalog: dict[str, tuple[Upstream, str]] = {}  # exposed name -> (upstream, its name)
        self.tools: dict[str, types.Tool] = {}
        self.offered: frozenset[str] = frozenset()
        # What tools/list shows: the offered tools, and those of `way: refuse` upstreams, which
        # stay listed when taken away (`kept`).
        self.listed: frozenset[str] = frozenset()
        self.kept: frozenset[str] = frozenset()
        self.notifications_sent = 0
        self.bus = InMemorySubscriptionBus()
        self.server = _GatewayServer(
            "breaker-panel-mcp",
            version="0.1.0",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self.bus),
        )
        # The SDK's OpenTelemetry middleware is a no-op without an exporter, yet it costs on
        # every message of a hop that exists only to add a breaker.
        self.server.middleware = []
        # A ServerSession is a per-request proxy: keep the latest one per client connection,
        # for as long as that connection lives.
        self._sessions: weakref.WeakKeyDictionary[Any, ServerSession | StdioFront] = (
            weakref.WeakKeyDictionary()
        )
        self._front: StdioFront | None = None  # serving stdio: it notifies its client itself
        self._changed = anyio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._settled_by = 0.0  # anyio time: start-ups are waited for until then, not after
        self.called: dict[str, float] = {}  # exposed name -> when a call of it last came
        self.prober = Prober(self)  # the trial of a half-open tool nobody calls (probe.py)

    # -- running -----------------------------------------------------------------------------

    async def run(self, serve: Callable[[Gateway], Awaitable[None]]) -> None:
        """`serve(self)` until it returns, the upstreams starting meanwhile; then shut down.

        A client's `initialize` is answered at once: `tools/list` and a call of a name not yet
        served wait for the upstreams still starting (`settled`), up to `connect_timeout`; one
        that starts later is announced with `list_changed` like any other change."""
        self._loop = asyncio.get_running_loop()
        self._settled_by = anyio.current_time() + self.config.connect_timeout
        async with anyio.create_task_group() as group:
            for upstream in self.upstreams:
                group.start_soon(upstream.run)
            group.start_soon(self._report_slow_starts)
            group.start_soon(self._watch)
            if any(upstream.config.probes for upstream in self.upstreams):
                group.start_soon(self.prober.run)
            await serve(self)
            self.breakers.end_session(STDIO_SESSION)
            # The client is gone; a stdio client kills us a few seconds after closing our
            # stdin, so deliver what the control plane has not seen before the upstreams close.
            await anyio.to_thread.run_sync(self.breakers.close)
            group.cancel_scope.cancel()

    async def settled(self) -> None:
        """Wait until every upstream's first start is over (either way), or `connect_timeout`
        after the gateway started, whichever comes first."""
        with anyio.move_on_after(self._settled_by - anyio.current_time()):
            for upstream in self.upstreams:
                await upstream.attempted.wait()

    async def _report_slow_starts(self) -> None:
        await self.settled()
        for upstream in self.upstreams:
            if upstream.client is None:
                logger.warning("upstream %s is not connected yet", upstream.name)

    def wake(self) -> None:
        """Thread-safe: re-check the offered set now (the fleet state changed)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._changed.set)

    async def serve_stdio(self) -> None:
        """Serve one client on stdin/stdout, with the fast path for `tools/call` (passthrough.py);
        the SDK's own stdio transport when stdin or stdout is not a pipe (a file, say)."""
        options = self.server.create_initialization_options()
        if not (self.passthrough and StdioFront.usable()):
            from mcp.server.stdio import stdio_server

            async with stdio_server() as (read, write):
                await self.server.run(read, write, options)
            return
        path = os.environ.get(TIMINGS_ENV)
        front = StdioFront(self.call_raw, timings=[] if path else None)
        # Its one client hears list_changed from the front, whether or not it listed first.
        self._front = self._sessions[front] = front
        try:
            await front.serve(self.server, options)
        finally:
            if path and front.timings is not None:
                with open(path, "w", encoding="utf-8") as out:
                    out.writelines(
                        " ".join(f"{v:.9f}" for v in row) + "\n" for row in front.timings
                    )

    def http_app(self, host: str) -> Any:
        app = self.server.streamable_http_app(host=host)
        self._on_session_end(self.server.session_manager)
        return app

    def _on_session_end(self, manager: Any) -> None:
        """Finish an MCP session's run when the SDK discards the session (the client's DELETE,
        its idle timeout, a crash). The SDK has no public hook for it: its private
        `_discard_session` is wrapped; without it, the gateway's idle timeout finishes the run."""
        discard = getattr(manager, "_discard_session", None)
        if discard is None:
            logger.warning("this mcp version hides session ends: runs end on the idle timeout")
            return

        async def discarded(session_id: str, transport: Any) -> None:
            try:
                await discard(session_id, transport)
            finally:
                self.breakers.end_session(f"session:{session_id}")

        manager._discard_session = discarded

    # -- the offered set ---------------------------------------------------------------------

    async def refresh(self, *, notify: bool = True) -> frozenset[str]:
        """Compute the offered set; if what tools/list shows changed, tell every client session
        (a tool taken away under `way: refuse` stays listed: no list_changed for it; none while
        the upstreams are starting: no list has been answered yet, each waits for them)."""
        offered = self.breakers.offered(self.tools)  # no await: one consistent read
        listed = offered | self.kept
        if offered == self.offered and listed == self.listed:
            return offered
        changed = listed != self.listed
        self.offered, self.listed = offered, listed
        if notify and changed and not self._starting():
            await self._notify()
        return offered

    def _starting(self) -> bool:
        """Some upstream's first start is not over, and `settled()` still waits for it."""
        return anyio.current_time() < self._settled_by and not all(
            upstream.attempted.is_set() for upstream in self.upstreams
        )

    async def _watch(self) -> None:
        while True:
            with anyio.move_on_after(self.config.breaker.check_interval):
                await self._changed.wait()
            self._changed = anyio.Event()
            await self.refresh()
            self.breakers.end_idle(self.config.session_idle_timeout)

    async def _notify(self) -> None:
        self.notifications_sent += 1
        logger.info("listed tools changed: %s", ", ".join(sorted(self.listed)))
        async with anyio.create_task_group() as group:  # a slow client delays nobody else
            for connection, session in list(self._sessions.items()):
                group.start_soon(self._notify_one, connection, session)
        await self.bus.publish(ToolsListChanged())  # 2026-07-28 clients: subscriptions/listen

    async def _notify_one(self, connection: Any, session: ServerSession | StdioFront) -> None:
        try:
            with anyio.fail_after(_NOTIFY_TIMEOUT):
                await session.send_tool_list_changed()
        except Exception as exc:  # noqa: BLE001 - a gone client must not stop the others
            logger.info("dropping a client session that cannot be notified: %s", exc)
            self._sessions.pop(connection, None)

    async def _tools_changed(self) -> None:
        self._build_catalog()
        await self.refresh()

    def _build_catalog(self) -> None:
        counts = Counter(tool.name for upstream in self.upstreams for tool in upstream.tools)
        catalog: dict[str, tuple[Upstream, str]] = {}
        tools: dict[str, types.Tool] = {}
        for upstream in self.upstreams:
            for tool in upstream.tools:
                problem = _bad_name(tool.name)
                if problem is not None:
                    # No client can call it safely, and it would reach logs and the panel.
                    logger.warning(
                        "tool %r of %s hidden: its name %s", tool.name[:100], upstream.name, problem
                    )
                    continue
                exposed = self._exposed_name(upstream, tool.name, counts[tool.name])
                if exposed in catalog:
                    logger.warning(
                        "tool %s of %s hidden: %s already has that name (set prefix)",
                        tool.name, upstream.name, catalog[exposed][0].name,
                    )  # fmt: skip
                    continue
                catalog[exposed] = (upstream, tool.name)
                tools[exposed] = tool.model_copy(update={"name": exposed})
        self.checks.update({name: tool.output_schema for name, tool in tools.items()})
        self.catalog, self.tools = catalog, tools
        self.kept = frozenset(
            name
            for name, (upstream, _) in catalog.items()
            if self.config.way_of(upstream.config) is Way.REFUSE
        )

    def _exposed_name(self, upstream: Upstream, name: str, count: int) -> str:
        mode = self.config.prefix
        if mode == "always" or (mode == "collisions" and count > 1):
            return f"{upstream.name}{self.config.separator}{name}"
        return name

    # -- the MCP handlers --------------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        self._remember(ctx)
        await self.settled()
        await self.refresh()
        return types.ListToolsResult(
            tools=[t for n, t in self.tools.items() if n in self.listed],
            ttl_ms=self.list_ttl_ms(),
        )

    def list_ttl_ms(self) -> int:
        """How long a client may cache tools/list (`ttlMs`, 2026-07-28): until the next moment
        the list can change by itself, the end of the first cooldown; `list_ttl` at most. A
        failure or an operator can change it sooner: then the refusal and list_changed tell."""
        cap = self.config.list_ttl
        due = self.breakers.retry_in(name for name in self.tools if name not in self.listed)
        return int(1000 * (cap if due is None else min(cap, due)))

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        """The SDK's path (streamable HTTP, per-request-era clients): the same relay, its
        result read into the SDK's model, which is the check for a malformed one here."""
        self._remember(ctx)
        try:
            result = await self.relay(
                params.name, params.arguments, _as_model, session=self._session_key(ctx)
            )
        except UnknownTool as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        return _as_model(result)

    async def call_raw(self, params: dict[str, Any], marks: list[float] | None = None) -> Any:
        """The stdio fast path: `params` of a `tools/call` in, its result as JSON out."""
        return await self.relay(
            params["name"], params.get("arguments"), _checked, marks, session=STDIO_SESSION
        )

    async def relay(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        check: Callable[[Any], Any],
        marks: list[float] | None = None,
        *,
        session: str = STDIO_SESSION,
    ) -> Any:
        """One `tools/call` through the breaker: refused with the notice when the tool is open,
        else relayed and its outcome recorded. `check(result)` returns what to answer with, or
        raises if the upstream's result is malformed (a retryable failure)."""
        entry = self.catalog.get(name)
        if entry is None:  # maybe the tool of an upstream still starting
            await self.settled()
            entry = self.catalog.get(name)
        if entry is None:
            raise UnknownTool(self._unknown(name))
        self.called[name] = anyio.current_time()  # a client's call is the trial: no probe
        record = self.breakers.begin(name, session=session, others=self.offered)
        if record.refused:
            await self.refresh()  # the client listed before this tool went away
            return _error_result(record.notice or "")
        finished = False
        try:
            result, failure = await self._pass_on(name, entry, arguments, check, marks)
            record.finish(failure)
            finished = True
        finally:
            if not finished:  # cancelled by the client: the call says nothing of the tool
                record.abandon()
        await self.refresh()
        return result

    def _unknown(self, name: str) -> str:
        """What a call of a name the gateway does not serve is told: the name, and each
        upstream that is not connected with why (a missing command, say), since the tool may
        be one of theirs."""
        text = f"unknown tool: {name[:100]!r}"
        down = [u for u in self.upstreams if u.client is None and u.problem]
        if not down:
            return text
        prefix = next((u for u in down if name.startswith(u.name + self.config.separator)), None)
        if prefix is not None:
            return f"{text}: upstream {prefix.name} is not running ({prefix.problem})"
        named = "; ".join(f"{u.name} ({u.problem})" for u in down[:5])
        return f"{text}; upstreams not running, whose tools are not served: {named}"

    async def _pass_on(
        self,
        name: str,
        entry: tuple[Upstream, str],
        arguments: dict[str, Any] | None,
        check: Callable[[Any], Any],
        marks: list[float] | None,
    ) -> tuple[Any, ToolFailure | None]:
        upstream, tool = entry
        timeout = self.config.call_timeout
        try:
            with anyio.fail_after(timeout):
                raw = await upstream.call(tool, arguments, marks, raw=self.passthrough)
        except TimeoutError:
            failure = ToolFailure(f"no answer from {upstream.name} within {timeout:g} s")
        except RuntimeError as exc:
            # The mcp client (raw=False) refuses structured content that breaks the tool's
            # outputSchema: the upstream answered, wrongly: degraded, like the check says.
            failure = _schema_refusal(exc) or self.classifier.error(exc)
        except Exception as exc:  # noqa: BLE001 - every upstream failure is the call's outcome
            failure = self.classifier.error(exc)
        else:
            try:
                result = check(raw)
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                message = str(exc).splitlines()[0][:200]
                failure = ToolFailure(f"{upstream.name} sent a malformed result: {message}")
            else:
                size = _content_size(raw)
                if size <= self.config.max_result_bytes:
                    return self._judged(name, tool, upstream, raw, result, arguments)
                # The tool worked; the call asked for more than anyone can read.
                failure = ToolFailure(
                    f"the result is {size / 1048576:.1f} MB, over the gateway's limit of "
                    f"{self.config.max_result_bytes / 1048576:.1f} MB (max_result_bytes): "
                    "ask for less (a narrower query, a page, a summary)",
                    retryable=False,
                )
                logger.warning("%s of %s: %s", tool, upstream.name, failure.message)
        return _error_result(f"{tool} failed: {failure.message}"), failure

    def _judged(
        self,
        name: str,
        tool: str,
        upstream: Upstream,
        raw: Any,
        result: Any,
        arguments: dict[str, Any] | None,
    ) -> tuple[Any, ToolFailure | None]:
        """A result that arrived: an isError answer by the classifier, else the result checks."""
        failure = self.classifier.result(raw)
        if failure is not None:
            return result, failure
        degraded = self.checks.checker.check(name, raw, arguments).failure()
        if degraded is None or degraded.check != "schema":
            return result, degraded  # degraded or not, the answer goes on as it is
        # Content that breaks the declared schema: the client's own mcp library would refuse
        # it, so say plainly what happened instead.
        return _error_result(f"{tool} failed: {upstream.name} {degraded.message}"), degraded

    def _remember(self, ctx: Any) -> None:
        if self._front is not None:
            return
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            session = ctx.session
            connection = getattr(session, "_connection", session)
            if connection not in self._sessions:
                # The MCP session is over once its connection is gone: finish its run then
                # (the idle timeout finishes it otherwise).
                key = self._session_key(ctx)
                weakref.finalize(connection, self._end_soon, key)
            self._sessions[connection] = session

    def _end_soon(self, key: str) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.breakers.end_session, key)

    def _session_key(self, ctx: Any) -> str:
        """Which run a call over HTTP belongs to: the MCP session (pre-2026-07-28 clients);
        else the conversation id the client sends, else its authorization; never the
        connection, which a 2026-07-28 client may change on every request."""
        connection = getattr(ctx.session, "_connection", None)
        session_id = getattr(connection, "session_id", None)
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and session_id:
            return f"session:{session_id}"
        meta = ctx.meta or {}
        headers = getattr(ctx.request, "headers", None) or {}
        conversation = meta.get(CONVERSATION_META) or headers.get(CONVERSATION_HEADER)
        if isinstance(conversation, str) and conversation:
            return f"conversation:{conversation[:200]}"
        authorization = headers.get("authorization")
        if authorization:  # hashed: the token itself is kept nowhere
            return "authorization:" + hashlib.sha256(authorization.encode()).hexdigest()[:32]
        return "anonymous"


def _bad_name(name: str) -> str | None:
    """Why a tool name cannot be served (None: it can): empty, too long, or with control
    characters or white space (the MCP spec allows letters, digits, _, - and .)."""
    if not name:
        return "is empty"
    if len(name) > 128:
        return "is over 128 characters"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") or c.isspace() for c in name):
        return "has control characters or white space"
    return None


def _content_size(result: Any) -> int:
    """Bytes of text and base64 data in a result's content (no serialising: it is per call)."""
    if isinstance(result, types.CallToolResult):
        result = result.model_dump(by_alias=True, exclude_none=True)
    if not isinstance(result, dict):
        return 0
    size = 0
    for block in result.get("content") or ():
        if isinstance(block, dict):
            for key in ("text", "data", "blob"):
                value = block.get(key)
                if isinstance(value, str):
                    size += len(value)
            resource = block.get("resource")
            if isinstance(resource, dict):
                size += sum(
                    len(v)
                    for k, v in resource.items()
                    if k in ("text", "blob") and isinstance(v, str)
                )
    return size


_SCHEMA_REFUSALS = ("Invalid structured content returned by tool", "has an output schema but")


def _schema_refusal(error: RuntimeError) -> DegradedResult | None:
    """The mcp client's refusal of a result that breaks the tool's outputSchema, as degraded."""
    text = str(error)
    if not any(marker in text for marker in _SCHEMA_REFUSALS):
        return None
    detail = " ".join(text.split(": ", 1)[-1].split())[:200]
    return DegradedResult(
        f"returns structured content that breaks its output schema ({detail})", check="schema"
    )


def _as_model(result: Any) -> types.CallToolResult:
    if isinstance(result, types.CallToolResult):
        return result
    return types.CallToolResult.model_validate(result)


def _checked(result: Any) -> Any:
    problem = malformed(result)
    if problem is not None:
        raise ValueError(problem)
    return result
