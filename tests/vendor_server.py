"""A real HTTP server on 127.0.0.1 standing in for a tool's vendor (what a probe checks).

Scriptable: ``down()`` answers every request with 503 (or any status), ``up()`` with 200;
``slow(seconds)`` holds answers back. Every request is recorded with its arrival time.

    with VendorServer() as vendor:
        vendor.down()
        ...probe vendor.url("/health")...
        assert len(vendor.requests) == 1
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["RecordedRequest", "VendorServer"]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    received_at: float  # time.monotonic()


class VendorServer:
    def __init__(self) -> None:
        self.status = 200
        self.delay = 0.0
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def start(self) -> VendorServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> VendorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def url(self, path: str = "/health") -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def down(self, status: int = 503) -> None:
        self.status = status

    def up(self) -> None:
        self.status = 200

    def slow(self, seconds: float) -> None:
        self.delay = seconds

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        vendor = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                with vendor._lock:
                    vendor._requests.append(
                        RecordedRequest(self.command, self.path, time.monotonic())
                    )
                if vendor.delay:
                    time.sleep(vendor.delay)  # a slow vendor, not a test waiting
                body = b"ok" if vendor.status < 400 else b"unavailable"
                self.send_response(vendor.status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler
