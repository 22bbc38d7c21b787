"""The gateway's light path for `tools/call`: JSON-RPC relayed as plain dicts, not SDK models.

`StdioFront` frames the client's stdin/stdout itself (pipes on the event loop, no thread per
line) and answers `tools/call` with `answer(params)`; every other message goes to the SDK server.
`RawStdioLink` (a stdio upstream, own framing) and `RawLink` (around the SDK's streamable HTTP
transport) let the gateway send `tools/call` with its own ids and take the reply as a dict;
everything else reaches the SDK `Client` as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from breaker_panel.mcp_gateway import require_mcp

require_mcp()  # mcp 1.x has no mcp_types: say what to install instead of an ImportError

from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value  # noqa: E402
from mcp.shared.message import ClientMessageMetadata, SessionMessage  # noqa: E402
from mcp_types import (  # noqa: E402
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS  # noqa: E402

__all__ = ["RawLink", "RawStdioLink", "StdioFront", "UnknownTool", "malformed"]

logger = logging.getLogger("breaker_panel.mcp_gateway")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
_EXIT_GRACE = 2.0  # the SDK's: for an upstream to exit after its stdin closes, then per signal
_MAX_LINE = 64 * 1024 * 1024  # one JSON-RPC message per line; a tool result can be large
_CANCEL_TIMEOUT = 1.0  # telling the upstream a call was abandoned must not hold anything up

Answer = Callable[[dict[str, Any], list[float] | None], Awaitable[dict[str, Any]]]


class UnknownTool(LookupError):
    """The client called a name the gateway does not serve: a JSON-RPC invalid-params error."""


def malformed(result: Any) -> str | None:
    """Why `result` is not a CallToolResult a client can read (None: it is one).

    Only the shape a client and the classifier rely on: a `content` list of typed blocks and a
    boolean `isError`; the blocks themselves are the upstream's business.
    """
    if not isinstance(result, dict):
        return f"the result is a {type(result).__name__}, not an object"
    content = result.get("content")
    if not isinstance(content, list):
        return "the result has no content list"
    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return "a content block has no type"
    if not isinstance(result.get("isError", False), bool):
        return "isError is not a boolean"
    return None


# -- the upstream side -----------------------------------------------------------------------


class _Door:
    """The raw `tools/call` of a link: ids `bp-N` (an SDK session's are integers), a future per
    call, resolved by whoever reads the upstream's replies."""

    def __init__(self) -> None:
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._count = 0
        self.connected = False
        self._context: Any = None

    # An MCP client `Transport`: entering opens the link (`_open`) and gives its two streams.
    async def __aenter__(self) -> tuple[Any, Any]:
        self._context = self._open()
        streams: tuple[Any, Any] = await self._context.__aenter__()
        return streams

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        result: bool | None = await self._context.__aexit__(*exc_info)
        return result

    def _open(self) -> Any:
        raise NotImplementedError

    def _next_id(self) -> tuple[str, asyncio.Future[Any]]:
        if not self.connected:
            raise ConnectionError("the upstream is not connected")
        self._count += 1
        request_id = f"bp-{self._count}"
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        return request_id, future

    def _resolve(self, request_id: Any, reply: Any) -> bool:
        future = self._pending.pop(request_id, None) if isinstance(request_id, str) else None
        if future is None:
            return False
        if not future.done():
            future.set_result((time.perf_counter(), reply))
        return True

    def _fail_pending(self) -> None:
        self.connected = False
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_result((0.0, ConnectionError("the upstream connection closed")))

    async def _wait(
        self, request_id: str, future: asyncio.Future[Any], marks: list[float] | None
    ) -> Any:
        """The reply's `result`; MCPError for a JSON-RPC error; cancels the upstream's work
        when the caller stops waiting."""
        if marks is not None:
            marks.append(time.perf_counter())
        try:
            replied_at, reply = await future
        except BaseException:
            if self._pending.pop(request_id, None) is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_TIMEOUT):
                    await self._cancel(request_id)
            raise
        if marks is not None:
            marks.append(replied_at)
        if isinstance(reply, Exception):
            raise reply
        error = reply.get("error")
        if error is not None:
            if not isinstance(error, dict):
                raise MCPError(INTERNAL_ERROR, f"a malformed error reply: {str(error)[:200]}")
            code = error.get("code")
            raise MCPError(
                code if isinstance(code, int) else INTERNAL_ERROR,
                str(error.get("message", ""))[:500],
                error.get("data"),
            )
        return reply.get("result")

    async def _cancel(self, request_id: str) -> None:
        raise NotImplementedError


def _cancelled(request_id: str) -> dict[str, Any]:
    params = {"requestId": request_id, "reason": "the gateway stopped waiting"}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


class RawLink(_Door):
    """An MCP client `Transport` around another one (streamable HTTP), with a side door for raw
    `tools/call`: replies to the gateway's own ids are taken off the read stream before the
    SDK `Client` sees them. The JSON-RPC envelope is still parsed by the SDK transport
    (pydantic-core, in Rust); the result inside is not.
    """

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self._inner = inner
        self._write: Any = None

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[tuple[Any, Any]]:
        async with self._inner as (read, write):
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](32)
            async with anyio.create_task_group() as group:
                group.start_soon(self._pump, read, send)
                self._write, self.connected = write, True
                try:
                    yield receive, write
                finally:
                    self._write = None
                    self._fail_pending()
                    group.cancel_scope.cancel()

    async def _pump(self, read: Any, send: MemoryObjectSendStream[Any]) -> None:
        try:
            async with send:
                async for item in read:
                    message = getattr(item, "message", None)
                    if isinstance(message, JSONRPCResponse | JSONRPCError) and self._resolve(
                        message.id, message.model_dump(by_alias=True, exclude_none=True)
                    ):
                        continue
                    await send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass  # either side closed: the link is over
        except Exception:  # the pump must not take the session's task down
            logger.exception("reading from an upstream failed")
        finally:
            self._fail_pending()

    async def call(self, params: dict[str, Any], marks: list[float] | None = None) -> Any:
        """Send `tools/call` with `params` as is; the reply's `result`, unvalidated.

        Raises MCPError for a JSON-RPC error reply, ConnectionError when the link is down or
        goes down before the reply. `marks` gets the times the request left and the reply came.
        """
        request_id, future = self._next_id()
        request = JSONRPCRequest.model_construct(
            jsonrpc="2.0", id=request_id, method="tools/call", params=params
        )
        # What the SDK's session adds to a tools/call (used by the streamable HTTP transport).
        headers = {MCP_NAME_HEADER: encode_header_value(str(params.get("name", "")))}
        try:
            await self._write.send(SessionMessage(request, ClientMessageMetadata(headers=headers)))
        except BaseException:
            self._pending.pop(request_id, None)
            raise
        return await self._wait(request_id, future, marks)

    async def _cancel(self, request_id: str) -> None:
        note = JSONRPCNotification.model_validate(_cancelled(request_id))
        with contextlib.suppress(Exception):
            await self._write.send(SessionMessage(note))


class RawStdioLink(_Door):
    """A stdio upstream with its own framing: the process's pipes are read and written on the
    event loop, raw replies go straight to their caller, and only the rest is parsed into SDK
    messages for the `Client` (itself a `Transport`). Spawned and stopped as the SDK does: its
    own process group, stdin closed first, then SIGTERM and SIGKILL to the group."""

    def __init__(
        self, command: str, args: Sequence[str], env: Mapping[str, str], cwd: str | None
    ) -> None:
        super().__init__()
        self._argv = [command, *args]
        self._env = dict(env)
        self._cwd = cwd
        self._stdin: Any = None

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[tuple[Any, Any]]:
        process = await asyncio.create_subprocess_exec(
            *self._argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,  # the gateway's own stderr, as the SDK's stdio client does
            env=self._env,
            cwd=self._cwd,
            limit=_MAX_LINE,
            start_new_session=True,
        )
        self._stdin, self.connected = process.stdin, True
        to_client, from_upstream = anyio.create_memory_object_stream[Any](32)
        to_upstream, from_client = anyio.create_memory_object_stream[SessionMessage](32)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._read, process, to_client)
                group.start_soon(self._write_sdk, from_client)
                try:
                    yield from_upstream, to_upstream
                finally:
                    self._fail_pending()
                    group.cancel_scope.cancel()
        finally:
            self._stdin = None
            with anyio.CancelScope(shield=True):
                await _stop(process)
            # As the SDK does: else the transport warns when collected after the loop closed.
            close = getattr(getattr(process, "_transport", None), "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()

    async def _read(self, process: Any, to_client: MemoryObjectSendStream[Any]) -> None:
        async with to_client:
            try:
                while line := await process.stdout.readline():
                    if b'"bp-' in line:  # maybe a reply to a raw call: no SDK parse for it
                        try:
                            reply = json.loads(line)
                        except ValueError:
                            reply = None
                        if isinstance(reply, dict) and self._resolve(reply.get("id"), reply):
                            continue
                    if not line.strip():
                        continue
                    try:
                        item: Any = SessionMessage(
                            jsonrpc_message_adapter.validate_json(line, by_name=False)
                        )
                    except ValueError as exc:
                        logger.warning("an upstream sent a line that is no JSON-RPC: %s", exc)
                        item = exc
                    await to_client.send(item)
            except (ValueError, ConnectionError) as exc:  # a line beyond _MAX_LINE, a reset
                logger.warning("reading from an upstream failed: %s", exc)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # the SDK session is gone
            finally:
                self._fail_pending()

    async def _write_sdk(self, messages: MemoryObjectReceiveStream[SessionMessage]) -> None:
        async with messages:
            async for session_message in messages:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                if not await self._send(data.encode() + b"\n"):
                    return

    async def _send(self, data: bytes) -> bool:
        stdin = self._stdin
        if stdin is None or stdin.is_closing():
            return False
        try:
            stdin.write(data)
            await stdin.drain()
        except (ConnectionError, OSError):
            self._fail_pending()
            return False
        return True

    async def call(self, params: dict[str, Any], marks: list[float] | None = None) -> Any:
        """As `RawLink.call`, written straight onto the upstream's stdin."""
        request_id, future = self._next_id()
        request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        data = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
        writing = time.perf_counter()
        if not await self._send(data + b"\n"):
            self._pending.pop(request_id, None)
            raise ConnectionError("the upstream's stdin is closed")
        if marks is not None:
            marks.append(time.perf_counter() - writing)  # the pipe write, for the benchmark
        return await self._wait(request_id, future, marks)

    async def _cancel(self, request_id: str) -> None:
        await self._send(json.dumps(_cancelled(request_id)).encode() + b"\n")


async def _stop(process: Any) -> None:
    """As the SDK's stdio client: close stdin, wait, then SIGTERM and SIGKILL the group."""
    with contextlib.suppress(Exception):
        process.stdin.close()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)  # its own session: the group id is its pid
        # returncode, not wait(): wait() also waits for the pipes, which a child may hold.
        with anyio.move_on_after(_EXIT_GRACE):
            while process.returncode is None:
                await anyio.sleep(0.01)
            return
    logger.warning("upstream process %d is still alive after SIGKILL", process.pid)


# -- the client side (stdio) -----------------------------------------------------------------


def _request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class StdioFront:
    """Serves one MCP client on this process's stdin/stdout; `tools/call` never meets the SDK.

    The fast path opens once the handshake has settled on a protocol version of the handshake
    era (the versions every desktop client speaks today): until then, and for a client of the
    per-request era, every message goes to the SDK server. While serving, fd 0 reads
    /dev/null and fd 1 writes to stderr, so stray output cannot corrupt the channel.
    """

    def __init__(
        self, answer: Answer, *, timings: list[tuple[float, float, float]] | None = None
    ) -> None:
        self.answer = answer
        # Per fast call, seconds (for the benchmark): the gateway's own wall time (the
        # upstream's share taken out); the CPU time of the event loop's thread from the line
        # read to the reply written (all its work for the call, whichever task did it); the
        # wall time of its two pipe writes (inside the first figure).
        self.timings = timings
        self.fast = False
        self._initialize_id: Any = None
        self._in_flight: dict[Any, anyio.CancelScope] = {}
        self._writer: asyncio.StreamWriter | None = None

    @staticmethod
    def usable() -> bool:
        """stdin and stdout are pipes or terminals (what the event loop can watch)."""
        import stat

        try:
            modes = [os.fstat(fd).st_mode for fd in (0, 1)]
        except OSError:
            return False
        return all(stat.S_ISFIFO(m) or stat.S_ISCHR(m) or stat.S_ISSOCK(m) for m in modes)

    async def serve(self, server: Any, options: Any) -> None:
        wire_in, wire_out = _claim_stdio()
        try:
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=_MAX_LINE)
            read_pipe = os.fdopen(wire_in, "rb", buffering=0, closefd=False)
            write_pipe = os.fdopen(wire_out, "wb", buffering=0, closefd=False)
            read_transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), read_pipe
            )
            write_transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, write_pipe
            )
            self._writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
            to_server_send, to_server = anyio.create_memory_object_stream[Any](0)
            from_server, from_server_receive = anyio.create_memory_object_stream[Any](math.inf)
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(self._read, reader, to_server_send, group)
                    group.start_soon(self._write_sdk, from_server_receive)
                    await server.run(to_server, from_server, options)
                    group.cancel_scope.cancel()
            finally:
                read_transport.close()
                write_transport.close()
        finally:
            _release_stdio(wire_in, wire_out)

    async def _read(
        self,
        reader: asyncio.StreamReader,
        to_server: MemoryObjectSendStream[Any],
        group: anyio.abc.TaskGroup,
    ) -> None:
        async with to_server:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, ConnectionError) as exc:  # a line beyond _MAX_LINE, a reset
                    logger.warning("stdin: %s; closing the session", exc)
                    return
                if not line:
                    return  # the client closed stdin
                if line.strip():
                    await self._dispatch(line, to_server, group)

    async def _dispatch(
        self, line: bytes, to_server: MemoryObjectSendStream[Any], group: anyio.abc.TaskGroup
    ) -> None:
        received = (time.perf_counter(), time.thread_time() if self.timings is not None else 0.0)
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict):
            method = message.get("method")
            params = message.get("params")
            if method == "tools/call" and self.fast and _request_id(message.get("id")):
                if isinstance(params, dict) and isinstance(params.get("name"), str):
                    arguments = params.get("arguments")
                    if arguments is None or isinstance(arguments, dict):
                        group.start_soon(self._call, message["id"], params, received)
                        return
            elif method == "notifications/cancelled" and isinstance(params, dict):
                scope = self._in_flight.get(params.get("requestId"))
                if scope is not None:
                    scope.cancel()  # no answer is sent for a cancelled request
                    return
            elif method == "initialize":
                self._initialize_id = message.get("id")
        try:  # the SDK's own parse
            parsed = SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
        except Exception as exc:  # noqa: BLE001 - answered here: the SDK would drop it silently
            self._refuse(message, exc)
            return
        await to_server.send(parsed)

    def _refuse(self, message: Any, exc: Exception) -> None:
        """Answer a line that is no JSON-RPC message with the JSON-RPC error for it (a client
        waiting on a request it sent malformed must not wait forever), and log it."""
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        request_id = message.get("id") if isinstance(message, dict) else None
        method = message.get("method") if isinstance(message, dict) else None
        if message is None:
            code, text = PARSE_ERROR, "Parse error: the line is not JSON"
        elif not isinstance(message, dict):
            code, text = INVALID_REQUEST, "Invalid Request: a message is one JSON object"
        elif isinstance(method, str) and _request_id(request_id):
            code, text = INVALID_PARAMS, f"Invalid params for {method[:100]!r}: {reason}"
        else:
            code, text = INVALID_REQUEST, f"Invalid Request: {reason}"
        logger.warning("a client sent a malformed message: %s", text)
        if isinstance(message, dict) and "id" not in message and isinstance(method, str):
            return  # a notification gets no answer, even a malformed one
        answer_id = request_id if _request_id(request_id) else None
        error = {"code": code, "message": text}
        reply = {"jsonrpc": "2.0", "id": answer_id, "error": error}
        self._send(json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode())

    async def _call(
        self, request_id: Any, params: dict[str, Any], received: tuple[float, float]
    ) -> None:
        marks: list[float] | None = [] if self.timings is not None else None
        reply: dict[str, Any]
        with anyio.CancelScope() as scope:
            self._in_flight[request_id] = scope
            try:
                result = await self.answer(params, marks)
                reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
            except UnknownTool as exc:
                error = {"code": INVALID_PARAMS, "message": str(exc)}
                reply = {"jsonrpc": "2.0", "id": request_id, "error": error}
            finally:
                self._in_flight.pop(request_id, None)
        if scope.cancelled_caught:
            return
        writing = time.perf_counter()
        self._send(json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode())
        if marks is not None and self.timings is not None and len(marks) >= 2:
            # In, up to the upstream's write; the upstream's reply, out to the client's pipe.
            now = time.perf_counter()
            own = (marks[-2] - received[0]) + (now - marks[-1])
            writes = (now - writing) + (marks[0] if len(marks) == 3 else 0.0)
            self.timings.append((own, time.thread_time() - received[1], writes))
        await self._drain()

    async def send_tool_list_changed(self) -> None:
        """Tell a handshake-era client its tool list changed (a 2026-07-28 client hears it on
        `subscriptions/listen`, through the SDK)."""
        if self.fast:
            self._send(b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')
            await self._drain()

    async def _write_sdk(self, messages: MemoryObjectReceiveStream[Any]) -> None:
        async with messages:
            async for session_message in messages:
                message = session_message.message
                if (
                    isinstance(message, JSONRPCResponse)
                    and self._initialize_id is not None
                    and message.id == self._initialize_id
                ):
                    self.fast = message.result.get("protocolVersion") in HANDSHAKE_PROTOCOL_VERSIONS
                self._send(message.model_dump_json(by_alias=True, exclude_unset=True).encode())
                await self._drain()

    def _send(self, data: bytes) -> None:
        writer = self._writer
        if writer is not None and not writer.is_closing():
            writer.write(data + b"\n")

    async def _drain(self) -> None:
        writer = self._writer
        if writer is not None:
            with contextlib.suppress(ConnectionError):
                await writer.drain()


def _claim_stdio() -> tuple[int, int]:
    """Private copies of fds 0 and 1 for the wire; 0 then reads /dev/null, 1 goes to stderr."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out


def _release_stdio(wire_in: int, wire_out: int) -> None:
    for fd, wire in ((0, wire_in), (1, wire_out)):
        with contextlib.suppress(OSError):
            os.dup2(wire, fd)
        with contextlib.suppress(OSError):
            os.close(wire)
