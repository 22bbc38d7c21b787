"""One upstream MCP server behind the gateway: kept connected, its tools cached, its health
checked with an MCP request."""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from breaker_panel.mcp_gateway import require_mcp

require_mcp()  # before the mcp imports: mcp 1.x would fail them with a less helpful error

import mcp.types as types  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import get_default_environment, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from breaker_panel.mcp_gateway.config import UpstreamConfig  # noqa: E402
from breaker_panel.mcp_gateway.passthrough import RawLink, RawStdioLink  # noqa: E402

__all__ = ["Upstream"]

logger = logging.getLogger("breaker_panel.mcp_gateway")

CONNECTION_CLOSED = -32000
_CLIENT_INFO = types.Implementation(name="breaker-panel-mcp", version="0.2.0")


class Upstream:
    """One upstream MCP server: kept connected (reconnecting with backoff), its tools cached.

    Its last known tools stay listed while it is down: calls to them fail fast as retryable,
    so the breaker, not a missing entry, takes them away from the clients.
    """

    def __init__(
        self,
        config: UpstreamConfig,
        *,
        on_tools: Callable[[], Awaitable[None]],
        passthrough: bool = True,
        health_interval: float = 30.0,
        health_timeout: float = 10.0,
        connect_timeout: float = 30.0,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.config = config
        self.health_interval = health_interval
        self.health_timeout = health_timeout
        self.passthrough = passthrough
        self.name = config.name
        self.tools: list[types.Tool] = []
        self.client: Client | None = None
        self.link: RawLink | RawStdioLink | None = None  # what tools/call takes, while connected
        self.attempted = anyio.Event()  # the first connection attempt is over (either way)
        # Why the upstream is not connected ("" while it is, or before the first attempt): what
        # a client calling one of its tools, or a name it does not serve, is told.
        self.problem = ""
        self._on_tools = on_tools
        self._wake = anyio.Event()
        self._restart = False
        self._stale = False

    async def run(self) -> None:
        delay = 0.5
        while True:
            self._restart = False
            link = self._link()
            # Start-up (spawn, initialize, tools/list) within connect_timeout: a hung server is
            # no server. The deadline is lifted once the tools are in.
            startup = anyio.CancelScope(deadline=anyio.current_time() + self.connect_timeout)
            try:
                with startup:
                    async with self._client(link) as client:
                        self.client, self.link = client, link
                        await self._load_tools(client)
                        startup.deadline = math.inf
                        delay = 0.5
                        self.problem = ""
                        self.attempted.set()
                        await self._serve(client)
                if startup.cancelled_caught:
                    raise TimeoutError
            except Exception as exc:  # noqa: BLE001 - any failure of the link means: reconnect
                reason = self.problem = _describe(exc)
                logger.warning("upstream %s: %s; reconnecting in %.1f s", self.name, reason, delay)
            finally:
                self.client = self.link = None
            self.attempted.set()
            await anyio.sleep(delay)
            delay = min(30.0, delay * 2)

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any] | None,
        marks: list[float] | None = None,
        *,
        raw: bool = True,
    ) -> Any:
        """`tools/call` relayed as is: the upstream's result as JSON, not yet checked; with
        `raw=False` through the SDK's client session, as a validated CallToolResult."""
        client, link = self.client, self.link
        if client is None or link is None:
            why = f" ({self.problem})" if self.problem else ""
            raise ConnectionError(f"upstream {self.name} is not connected{why}")
        params: dict[str, Any] = {"name": tool}
        if arguments is not None:
            params["arguments"] = arguments
        try:
            if not raw:
                return await client.call_tool(tool, arguments)
            return await link.call(params, marks)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._drop(client, exc)
            raise
        except (
            OSError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            anyio.EndOfStream,
        ) as exc:
            self._drop(client, exc)
            raise

    def _drop(self, client: Client, why: BaseException) -> None:
        """The link of `client` is broken: connect again (unless that was done already)."""
        if client is self.client:
            self.problem = _describe(why)
            logger.warning("upstream %s: %s; reconnecting", self.name, self.problem)
            self._restart = True
            self._wake.set()

    async def _serve(self, client: Client) -> None:
        while not self._restart:
            with anyio.move_on_after(self.health_interval) as idle:
                await self._wake.wait()
            if idle.cancelled_caught:
                await self._check_health(client)
                continue
            self._wake = anyio.Event()
            if self._stale:
                self._stale = False
                await self._load_tools(client)

    async def _check_health(self, client: Client) -> None:
        """Ask the upstream an MCP request (tools/list, which every server answers), never a
        bare GET: a live socket or an HTTP 200 says nothing of the MCP server behind it. The
        answer also refreshes the tools of a server that never sends list_changed."""
        try:
            with anyio.fail_after(self.health_timeout):
                await self._load_tools(client)
        except Exception as exc:  # noqa: BLE001 - any failure means: reconnect
            reason = "no answer" if isinstance(exc, TimeoutError) else f"{exc}"
            self.problem = f"failed its health check (tools/list): {reason or type(exc).__name__}"
            logger.warning(
                "upstream %s failed its health check (tools/list): %s; reconnecting",
                self.name, reason or type(exc).__name__,
            )  # fmt: skip
            self._restart = True

    async def _load_tools(self, client: Client) -> None:
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.tools = tools
        await self._on_tools()

    async def _on_message(self, message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method == "notifications/tools/list_changed":
            self._stale = True  # reloaded by the upstream's own task, not this reader
            self._wake.set()

    def _link(self) -> RawLink | RawStdioLink:
        config = self.config
        if config.url:
            http = create_mcp_http_client(headers=config.headers or None)
            return RawLink(streamable_http_client(config.url, http_client=http))
        if self.passthrough and sys.platform != "win32":
            env = get_default_environment() | config.env  # what the SDK's stdio client passes
            return RawStdioLink(config.command, config.args, env, config.cwd)
        # The SDK's own transport: on Windows (it spawns a job object), and without passthrough.
        params = StdioServerParameters(
            command=config.command, args=list(config.args), env=config.env, cwd=config.cwd
        )
        return RawLink(stdio_client(params))

    def _client(self, link: RawLink | RawStdioLink) -> Client:
        # "legacy": the initialize handshake every MCP server speaks, and change notifications
        # on the session itself.
        return Client(
            link,
            mode="legacy",
            client_info=_CLIENT_INFO,
            message_handler=self._on_message,
            cache=None,
        )


def _describe(exc: BaseException) -> str:
    """One line for the log: a failed start names its cause (a missing command, a hung server)."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    if isinstance(exc, TimeoutError):
        return "no answer to initialize and tools/list in time"
    if isinstance(exc, FileNotFoundError):
        return f"cannot start it: {exc.strerror}: {exc.filename!r}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
