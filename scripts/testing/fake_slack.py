"""A real HTTP server on 127.0.0.1 that plays Slack's incoming-webhook endpoint.

It records every request (method, path, headers, raw and parsed body, arrival time) and answers
from a script: replies queued per webhook path, then replies queued for any path, then a default
reply (200 "ok" unless changed). Like Slack, it first rejects what Slack would reject whatever
the script says: a body that is not JSON (400 ``invalid_payload``), a message with neither text
nor blocks (400 ``no_text``), and, when ``validate_blocks`` is on, blocks that
``slack_sdk.models`` finds invalid or more than 50 of them (400 ``invalid_blocks``). That check
uses slack_sdk's own models, not the code under test, so it can catch our mistakes.

Usage::

    with FakeSlackServer() as slack:
        slack.enqueue(rate_limited(3), OK)
        ...post to slack.webhook_url...
        [first, second] = slack.wait_for_requests(2)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

__all__ = (
    "CHANNEL_ARCHIVED",
    "DROP",
    "INVALID_PAYLOAD",
    "INVALID_TOKEN",
    "NO_SERVICE",
    "OK",
    "SERVER_ERROR",
    "FakeSlackServer",
    "RecordedRequest",
    "Reply",
    "rate_limited",
    "slow",
)

DEFAULT_WEBHOOK_PATH = "/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
MAX_BODY_BYTES = 1_048_576


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``delay`` holds it back (for timeouts); ``drop`` closes the
    connection without any answer (a reset as the client sees it)."""

    status: int = 200
    body: str = "ok"
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False


OK = Reply()
SERVER_ERROR = Reply(500, "rollup_error")
NO_SERVICE = Reply(404, "no_service")
INVALID_TOKEN = Reply(403, "invalid_token")
CHANNEL_ARCHIVED = Reply(410, "channel_is_archived")
INVALID_PAYLOAD = Reply(400, "invalid_payload")
DROP = Reply(drop=True)


def rate_limited(retry_after: float | str = 1) -> Reply:
    """429 with ``Retry-After`` (seconds, or any string such as an HTTP date)."""
    value = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
    return Reply(429, "rate_limited", {"Retry-After": value})


def slow(seconds: float, then: Reply = OK) -> Reply:
    """``then``, but only after ``seconds`` (a client with a shorter timeout gives up first)."""
    return replace(then, delay=seconds)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    json: Any
    received_at: float  # time.monotonic() once the body was read (system-wide on Linux)
    received_wall: float  # time.time() at the same moment
    reply: Reply

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == wanted), None)


def _blocks_problem(payload: Mapping[str, Any]) -> str | None:
    blocks = payload.get("blocks")
    if blocks is None:
        return None
    if not isinstance(blocks, list) or len(blocks) > 50:
        return "blocks must be a list of at most 50"
    for block in blocks:
        try:
            parsed = Block.parse(block)
            if parsed is None:
                return "empty block"
            parsed.validate_json()
        except (SlackObjectFormationError, KeyError, TypeError, AttributeError) as exc:
            return f"{type(exc).__name__}: {exc}"
    return None


class FakeSlackServer:
    def __init__(self, *, validate_blocks: bool = True) -> None:
        self.validate_blocks = validate_blocks
        self.default = OK
        self._lock = threading.Condition()
        self._queues: dict[str | None, deque[Reply]] = {}
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeSlackServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers that are holding a slow reply
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeSlackServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- addresses ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def webhook_url(self) -> str:
        return self.url_for(DEFAULT_WEBHOOK_PATH)

    def url_for(self, path: str) -> str:
        return self.base_url + path

    # --- script ---------------------------------------------------------------------------

    def enqueue(self, *replies: Reply, path: str | None = None) -> None:
        """Answer the next requests (to ``path`` only, or to any path) with ``replies``."""
        with self._lock:
            self._queues.setdefault(path, deque()).extend(replies)

    def pending_replies(self, path: str | None = None) -> int:
        with self._lock:
            return len(self._queues.get(path, ()))

    def _next_reply(self, path: str) -> Reply:
        with self._lock:
            for key in (path, None):
                queue = self._queues.get(key)
                if queue:
                    return queue.popleft()
            return self.default

    # --- what was received ----------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_for(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    def wait_for_requests(self, count: int, *, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until ``count`` requests arrived (polling with a deadline, never a fixed sleep)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"expected {count} request(s) within {timeout} s, got {len(self._requests)}"
                    )
                self._lock.wait(left)
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._queues.clear()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()

    # --- HTTP -----------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "FakeSlack/1"

            def do_POST(self) -> None:
                fake._handle(self)

            def do_GET(self) -> None:
                fake._answer(self, Reply(405, "method_not_allowed"))

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean; every request is recorded instead

        return Handler

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(min(length, MAX_BODY_BYTES)) if length > 0 else b""
        received_at, received_wall = time.monotonic(), time.time()
        payload, reply = self._parse(body, length)
        if reply is None:
            reply = self._next_reply(handler.path)
        self._record(
            RecordedRequest(
                method=handler.command,
                path=handler.path,
                headers=dict(handler.headers.items()),
                body=body,
                json=payload,
                received_at=received_at,
                received_wall=received_wall,
                reply=reply,
            )
        )
        self._answer(handler, reply)

    def _parse(self, body: bytes, length: int) -> tuple[Any, Reply | None]:
        """The parsed body, and the reply Slack would give whatever the script says (or None)."""
        if length > MAX_BODY_BYTES:
            return None, Reply(413, "request_too_large")
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None, INVALID_PAYLOAD
        if not isinstance(payload, dict):
            return payload, INVALID_PAYLOAD
        if not payload.get("text") and not payload.get("blocks"):
            return payload, Reply(400, "no_text")
        if self.validate_blocks and _blocks_problem(payload):
            return payload, Reply(400, "invalid_blocks")
        return payload, None

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.delay and self._stopping.wait(reply.delay):
            return  # shutting down: let the connection close unanswered
        if reply.drop:
            handler.close_connection = True
            return
        data = reply.body.encode()
        try:
            handler.send_response(reply.status)
            handler.send_header("Content-Type", "text/html")
            handler.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout fired first), which is what a test wanted
