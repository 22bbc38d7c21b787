"""Scripted stand-ins for the control plane's API on a free local port, for the SDK's tests and
benchmark. ``ScriptedServer`` answers each ``POST /api/v1/events`` batch with
``script(events, nth request)`` and keeps every batch; ``LocalServer`` and ``JsonHandler`` are
the parts other scripted servers are built from."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from breaker_panel import ControlPlane, ToolFailure

Events = list[dict[str, Any]]
# status, JSON body (bytes: sent as they are), and optionally extra headers
Answer = tuple[int, Any] | tuple[int, Any, dict[str, str]]
Script = Callable[[Events, int], Answer]
FLEET = {"version": 1, "tools": {}}
TRANSITION_BUG = {"detail": "Internal Server Error: KeyError: 'run-1'"}


def accepted(events: Events) -> Answer:
    return 200, {"accepted": len(events), "duplicates": 0, "rejected": [], "fleet": FLEET}


def fails_on_transitions(events: Events, nth: int) -> Answer:
    """A 500 for any batch holding a ``breaker.transition`` (as the SQLite writer of issue 10)."""
    if any(event["type"] == "breaker.transition" for event in events):
        return 500, TRANSITION_BUG
    return accepted(events)


class JsonHandler(BaseHTTPRequestHandler):
    """Reads and answers JSON; quiet."""

    def read_json(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        """``body`` as JSON (bytes: sent as they are)."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response_only(status)
            for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except OSError:
            pass  # the client gave up waiting (a test of timeouts)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class LocalServer:
    """Serves ``handler`` on a free 127.0.0.1 port on a daemon thread until ``close()``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ScriptedServer(LocalServer):
    """``GET`` answers an empty fleet. Keeps every batch (``batches``) and those it answered 200
    (``taken``)."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.fail_drop_reports = False  # answer 500 to any body carrying a drop report
        self.batches: list[Events] = []
        self.taken: list[Events] = []
        self.lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                self.answer(200, FLEET)

            def do_POST(self) -> None:
                body = self.read_json()
                with server.lock:
                    server.batches.append(body["events"])
                    nth = len(server.batches)
                answer = server.script(body["events"], nth)
                if server.fail_drop_reports and "dropped" in body:
                    answer = 500, {"detail": "bug in the drop report"}
                if answer[0] == 200:
                    with server.lock:
                        server.taken.append(body["events"])
                self.answer(*answer)

        super().__init__(Handler)

    def ids_received(self) -> list[str]:
        with self.lock:
            return [event["id"] for batch in self.batches for event in batch]

    def taken_ids(self) -> list[str]:
        with self.lock:
            return [event["id"] for batch in self.taken for event in batch]


def play_run(plane: ControlPlane, *, calls: int = 12) -> None:
    """A run that loses web_search (a run and a worker transition) among model and tool calls."""
    run = plane.start_run(agent="research")
    for _ in range(calls):
        run.record_model_call(input_tokens=10, output_tokens=5, cost_usd=0.001)
        run.record_failure("web_search", ToolFailure("503 from vendor"))
        run.record_success("read_page")
    run.finish()
