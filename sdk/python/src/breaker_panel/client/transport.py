"""HTTP to the control plane: requests that never raise, each sending thread on its own kept-alive
connection (the long-poll on a fresh one), and the backoff between tries (exponential with
jitter, or the server's ``Retry-After``).

Only the standard library is used, so an agent process needs nothing beyond ``breaker_panel``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import random
import socket
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

logger = logging.getLogger("breaker_panel.client")

# How sending on a kept connection the server closed while it was idle fails (RemoteDisconnected,
# no status line, is a ConnectionResetError; a TLS write may fail with SSLEOFError instead).
_CLOSED_WHILE_IDLE = (
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    ssl.SSLEOFError,
)


class Transport:
    """Requests to one control plane (``http(s)://host[:port][/path]``) with its agent token.

    A request with its own ``timeout`` (the fleet long-poll) goes on a fresh connection and is
    ``held`` while it waits, so that ``cut_held()`` can end it from another thread. Any other
    request reuses the connection its thread kept alive, until ``close()``.
    """

    def __init__(self, url: str, *, token: str, timeout: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://host[:port], got {url!r}")
        self.timeout = timeout
        self.held: http.client.HTTPConnection | None = None
        self._cut = False  # closing: no new held request, and the one held is cut
        self._interrupt = False  # end the held request (or the next) early, once
        self._held_lock = threading.Lock()
        self._kept: dict[int, http.client.HTTPConnection] = {}  # idle, by thread id
        self._kept_lock = threading.Lock()
        self._closed = False  # close(): keep no connection alive any more
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._base_path = parts.path.rstrip("/")
        self._headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "User-Agent": "breakers-sdk",
        }

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        extra_headers: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        """One request; status 0 for a network error. Never raises. A request with its own
        ``timeout`` (the long-poll) goes on a fresh connection that ``cut_held()`` can cut
        short; any other on this thread's kept-alive connection."""
        headers = {**self._headers, **(extra_headers or {})}
        if timeout is not None:
            return self._held_request(method, path, body, headers, timeout)
        with self._kept_lock:
            kept = self._kept.pop(threading.get_ident(), None)
        connection = self._connection(None) if kept is None else kept
        try:
            try:
                response = _send(connection, method, self._base_path + path, body, headers)
            except _CLOSED_WHILE_IDLE as exc:
                if kept is None:
                    raise
                # The server closed the kept connection while it was idle, and no status line
                # came: send once more on a fresh one. Safe even if the server did get it: ingest
                # is idempotent by event id, and a worker asking again for the trial lease it
                # holds gets it again.
                logger.debug("%s %s: kept connection closed (%s); sending again", method, path, exc)
                connection.close()
                connection = self._connection(None)
                response = _send(connection, method, self._base_path + path, body, headers)
            raw = response.read()  # all of it: the connection is reused only once it is read
        except (OSError, http.client.HTTPException) as exc:
            logger.debug("%s %s failed: %s", method, path, exc)
            connection.close()
            return 0, {}, None
        if response.will_close:  # Connection: close, or an HTTP/1.0 server
            connection.close()
        else:
            self._keep(connection)
        return _answer(response, raw)

    def close(self) -> None:
        """Close the kept-alive connections and keep none from now on (requests still go, each
        on a fresh connection). One in use is closed by its thread when its request ends."""
        with self._kept_lock:
            self._closed = True
            idle, self._kept = list(self._kept.values()), {}
        for connection in idle:
            connection.close()

    def _keep(self, connection: http.client.HTTPConnection) -> None:
        with self._kept_lock:
            if not self._closed:
                self._kept[threading.get_ident()] = connection
                return
        connection.close()

    def _held_request(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str], timeout: float
    ) -> tuple[int, dict[str, str], Any]:
        connection = self._connection(timeout)
        try:
            if not self._hold(connection):
                return 0, {}, None
            response = _send(connection, method, self._base_path + path, body, headers)
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            logger.debug("%s %s failed: %s", method, path, exc)
            return 0, {}, None
        finally:
            with self._held_lock:
                self.held = None
                self._interrupt = False
            connection.close()
        return _answer(response, raw)

    def cut_held(self) -> None:
        """Wake the thread out of a held request (shutdown interrupts a blocked read on another
        thread; close alone may not), and refuse to hold another, so closing never waits for
        the server."""
        with self._held_lock:
            self._cut = True
            sock = getattr(self.held, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing to wake
                sock.shutdown(socket.SHUT_RDWR)

    def interrupt_held(self) -> None:
        """End the held request now (status 0), or the next one before it is sent, once: for a
        thread that has something to do before the server would answer."""
        with self._held_lock:
            self._interrupt = True
            sock = getattr(self.held, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def clear_interrupt(self) -> None:
        """The thread did what it was interrupted for: the next held request may wait."""
        with self._held_lock:
            self._interrupt = False

    def _hold(self, connection: http.client.HTTPConnection) -> bool:
        # Connect first, then register under the lock: a cut_held() either comes before (this
        # sees the flag and gives up) or after (it finds the socket to shut down).
        if self._cut:
            return False
        connection.connect()
        with self._held_lock:
            if self._cut or self._interrupt:
                return False
            self.held = connection
            return True

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        timeout = self.timeout if timeout is None else timeout
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)


def _send(
    connection: http.client.HTTPConnection,
    method: str,
    url: str,
    body: bytes | None,
    headers: Mapping[str, str],
) -> http.client.HTTPResponse:
    """Send the request and read the status line and headers (not the body)."""
    connection.request(method, url, body=body, headers=dict(headers))
    # A server that writes headers and body apart without TCP_NODELAY (Django's runserver) holds
    # the body until it sees our ACK, which Linux delays 40 ms on a kept connection: ACK at once.
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or no socket
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
    return connection.getresponse()


def _answer(response: http.client.HTTPResponse, raw: bytes) -> tuple[int, dict[str, str], Any]:
    headers = {key.lower(): value for key, value in response.getheaders()}
    try:
        reply = json.loads(raw) if raw else None
    except ValueError:
        reply = None
    return response.status, headers, reply


@dataclass(frozen=True)
class Backoff:
    """The pause before the next try after ``failures`` answers in a row that were not a 200."""

    base: float
    cap: float

    def delay(self, failures: int, headers: Mapping[str, str]) -> float:
        retry_after = headers.get("retry-after")
        if retry_after is not None:
            try:
                return min(self.cap, max(0.0, float(retry_after)))
            except ValueError:
                pass  # an HTTP date: fall back to backoff
        exponential = min(self.cap, self.base * 2 ** (failures - 1))
        return random.uniform(exponential / 2, exponential)  # jitter spreads a fleet's retries


def encode(body: Mapping[str, Any]) -> bytes:
    # default=str: a value JSON cannot carry (a Decimal cost, say) must not make the whole batch
    # unsendable; the control plane rejects that one event with a reason instead.
    return json.dumps(body, default=str).encode()
