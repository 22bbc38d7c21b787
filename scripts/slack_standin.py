#!/usr/bin/env python3
"""A local stand-in for Slack's incoming webhooks, for `make demo`: it accepts what Slack would
accept and shows every message it received on a page (newest first), so a newcomer sees the
alert for every opening, closing and operator action without a Slack workspace.

    python scripts/slack_standin.py --port 8001   # webhook: http://127.0.0.1:8001/services/demo

Standard library only. Message text comes from agents (tool names, errors): it is escaped.
"""

from __future__ import annotations

import argparse
import html
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY_BYTES = 1_000_000
KEEP = 500

_messages: deque[tuple[float, dict[str, Any]]] = deque(maxlen=KEEP)
_lock = threading.Lock()


def _texts(payload: dict[str, Any]) -> Iterator[str]:
    """The readable text of a message: its blocks' texts, else its ``text``."""
    found = False
    for block in payload.get("blocks") or []:
        if not isinstance(block, dict):
            continue
        for part in [
            block.get("text"),
            *(block.get("fields") or []),
            *(block.get("elements") or []),
        ]:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                found = True
                yield part["text"]
    if not found and isinstance(payload.get("text"), str):
        yield payload["text"]


def _page() -> bytes:
    with _lock:
        items = list(_messages)[::-1]
    rows = []
    for received, payload in items:
        when = time.strftime("%H:%M:%S", time.gmtime(received))
        body = "".join(f"<p>{html.escape(text)}</p>" for text in _texts(payload))
        rows.append(f"<article><time>{when} UTC</time>{body or '<p>(empty)</p>'}</article>")
    listing = "\n".join(rows) or "<p>No message yet: alerts appear here when a breaker opens.</p>"
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="3"><title>Slack stand-in ({len(items)})</title>
<style>body{{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}}
article{{border:1px solid #ccc;border-radius:6px;padding:.5rem 1rem;margin:.75rem 0}}
time{{color:#555;font-size:13px}}
p{{margin:.3rem 0;white-space:pre-wrap;overflow-wrap:anywhere}}</style></head><body>
<h1>Slack stand-in</h1><p>What Breaker Panel sent to its Slack webhook, newest first
({len(items)} kept, this page refreshes itself).</p>
{listing}</body></html>""".encode()


class Handler(BaseHTTPRequestHandler):
    server_version = "slack-standin"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            return self._reply(413, b"request_too_large")
        try:
            payload = json.loads(self.rfile.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return self._reply(400, b"invalid_payload")
        if not isinstance(payload, dict) or not (payload.get("text") or payload.get("blocks")):
            return self._reply(400, b"no_text")
        with _lock:
            _messages.append((time.time(), payload))
        self._reply(200, b"ok")

    def do_GET(self) -> None:
        if self.path == "/messages.json":
            with _lock:
                data = json.dumps([p for _, p in _messages]).encode()
            return self._reply(200, data, "application/json")
        self._reply(200, _page(), "text/html; charset=utf-8")

    def _reply(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"Slack stand-in on http://{args.host}:{args.port}/", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
