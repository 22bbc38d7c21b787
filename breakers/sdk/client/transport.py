"""HTTP to the control plane: one request on a fresh connection that never raises, and the
backoff between tries (exponential with jitter, or the server's ``Retry-After``).

Only the standard library is used, so an agent process needs nothing beyond ``breakers.sdk``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import random
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

logger = logging.getLogger("breakers.sdk.client")


class Transport:
    """Requests to one control plane (``http(s)://host[:port][/path]``) with its agent token.

    A request with its own ``timeout`` (the fleet long-poll) is ``held`` while it waits, so that
    ``cut_held()`` can end it from another thread.
    """

    def __init__(self, url: str, *, token: str, timeout: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://host[:port], got {url!r}")
        self.timeout = timeout
        self.held: http.client.HTTPConnection | None = None
        self._cut = False  # closing: no new held request, and the one held is cut
        self._held_lock = threading.Lock()
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
        """One request on a fresh connection; status 0 for a network error. Never raises.
        A request with its own ``timeout`` (the long-poll) can be cut short by ``cut_held()``."""
        connection = self._connection(timeout)
        try:
            if timeout is not None and not self._hold(connection):
                return 0, {}, None
            connection.request(
                method,
                self._base_path + path,
                body=body,
                headers={**self._headers, **(extra_headers or {})},
            )
            response = connection.getresponse()
            raw = response.read()
            headers = {key.lower(): value for key, value in response.getheaders()}
        except (OSError, http.client.HTTPException) as exc:
            logger.debug("%s %s failed: %s", method, path, exc)
            return 0, {}, None
        finally:
            if timeout is not None:
                self.held = None
            connection.close()
        try:
            reply = json.loads(raw) if raw else None
        except ValueError:
            reply = None
        return response.status, headers, reply

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

    def _hold(self, connection: http.client.HTTPConnection) -> bool:
        # Connect first, then register under the lock: a cut_held() either comes before (this
        # sees the flag and gives up) or after (it finds the socket to shut down).
        if self._cut:
            return False
        connection.connect()
        with self._held_lock:
            if self._cut:
                return False
            self.held = connection
            return True

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        timeout = self.timeout if timeout is None else timeout
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)


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
