"""Benchmark: what one ControlPlane batch costs through ``flush()`` against a local server (plain
HTTP, or TLS with a throwaway self-signed certificate), for this checkout and a baseline one.

Run from the repository root:

    .venv/bin/python bench/bench_batches.py --baseline-tree DIR [--rounds 6] [--batches 200]
    .venv/bin/python scripts/own_services.py -- \
        .venv/bin/python bench/bench_batches.py --baseline-tree DIR --gunicorn

``DIR`` is another checkout (``git archive COMMIT | tar -x -C DIR``). The server is the standard
library's ``ThreadingHTTPServer`` speaking HTTP/1.1 with keep-alive, answering what ingest
answers, in this process: plain, TLS, and plain without TCP_NODELAY (which gunicorn sets and
Django's runserver does not); each round runs each checkout's ``ControlPlane`` in a child process
(the order alternates between rounds), which sends ``--batches`` batches of one 20-event run,
each timed from ``flush()`` to its acknowledgement. Reported per round and checkout: the median
ms per batch and the TCP connections the server accepted; the ratio (this ÷ baseline) is the
median of per-round ratios, which a shared machine's load disturbs far less than the times.
With ``--gunicorn``, also the control plane itself on a scratch PostgreSQL database and the
Redis of ``REDIS_URL``: gunicorn with the production settings (controlplane/gunicorn_conf.py,
gevent, keep-alive 5 s), one worker, plain HTTP.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EVENTS_PER_BATCH = 20
WARM_UP = 5  # batches not timed: the child's imports, the first connection
FLEET = {"version": 1, "tools": {}}


class Server:
    """HTTP/1.1 with keep-alive on a free 127.0.0.1 port; counts accepted connections.
    ``nodelay``: TCP_NODELAY on each connection, as gunicorn sets (Django's runserver does not)."""

    def __init__(self, tls_dir: Path | None, nodelay: bool) -> None:
        self.connections = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                server.connections += 1  # (one client at a time)
                if nodelay:
                    self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:
                self._answer(FLEET)

            def do_POST(self) -> None:
                events = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["events"]
                self._answer(
                    {"accepted": len(events), "duplicates": 0, "rejected": [], "fleet": FLEET}
                )

            def _answer(self, body: Any) -> None:
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls_dir is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls_dir / "cert.pem", tls_dir / "key.pem")
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def self_signed(directory: Path) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(directory / "key.pem"), "-out", str(directory / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip


def client(url: str, token: str, tree: str, batches: int) -> None:
    """The child: this tree's ControlPlane sends the batches; prints the ms of each as JSON."""
    sys.path.insert(0, tree)
    from breaker_panel import ControlPlane
    from breaker_panel.client import transport

    assert transport.__file__.startswith(tree), transport.__file__
    settings = {
        "batch_size": 100,
        "flush_interval": 60,
        "fleet_wait": 0,
        "fleet_poll_interval": 3600,
    }
    worker_id = f"bench-{os.getpid()}"
    try:
        from breaker_panel import PlaneConfig
    except ImportError:  # a baseline checkout from before the settings moved into PlaneConfig
        plane = ControlPlane(url, token=token, worker_id=worker_id, **settings)
    else:
        plane = ControlPlane(url, token=token, worker_id=worker_id, config=PlaneConfig(**settings))
    times = []
    for n in range(WARM_UP + batches):
        run = plane.start_run(agent="bench")
        for _ in range(EVENTS_PER_BATCH - 2):
            run.record_success("web_search")
        run.finish()
        started = time.perf_counter()
        if not plane.flush(timeout=10):
            raise SystemExit("a batch was not acknowledged")
        if n >= WARM_UP:
            times.append((time.perf_counter() - started) * 1000)
    plane.close()
    print(json.dumps(times))


def one_child(url: str, token: str, tree: Path, batches: int, env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--client", url, "--token", token, "--tree", str(tree),
         "--batches", str(batches)],
        check=True, capture_output=True, text=True, env=env,
    ).stdout  # fmt: skip
    return statistics.median(json.loads(out))


@contextmanager
def gunicorn() -> Iterator[tuple[str, str]]:
    """The control plane (production gunicorn settings, one worker) on a scratch database: its
    URL and an agent token."""
    sys.path.insert(0, str(ROOT / "bench"))
    from support.scratch import free_port, manage, scratch_database

    admin = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    name = os.environ.get("TEST_DATABASE_NAME", "bp") + "_bench_batches"
    with scratch_database(admin, name) as db_url, tempfile.TemporaryDirectory() as prom:
        port = free_port()
        env = os.environ | {
            "DATABASE_URL": db_url, "DEBUG": "False", "SECRET_KEY": secrets.token_urlsafe(48),
            "LOG_LEVEL": "ERROR", "WEB_CONCURRENCY": "1", "GUNICORN_BIND": f"127.0.0.1:{port}",
            "PROMETHEUS_MULTIPROC_DIR": prom, "TLS_PROXY": "False",
        }  # fmt: skip
        try:
            manage(env, "migrate", "--verbosity", "0")
        except subprocess.CalledProcessError as exc:
            raise SystemExit(f"migrate failed:\n{exc.stderr}") from exc
        token = manage(env, "create_agent_token", "bench").strip().splitlines()[-1]
        command = [str(ROOT / ".venv/bin/gunicorn"), "-c", "python:controlplane.gunicorn_conf",
                   "--no-control-socket", "--log-level", "warning",
                   "controlplane.wsgi"]  # fmt: skip
        server = subprocess.Popen(command, cwd=ROOT, env=env)
        try:
            wait_for_api(port)
            yield f"http://127.0.0.1:{port}", token
        finally:
            server.terminate()
            server.wait(timeout=30)


def wait_for_api(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("POST", "/api/v1/events", body=b"{}")  # 401: the stack is up
            if connection.getresponse().status == 401:
                return
        time.sleep(0.2)
    raise SystemExit("gunicorn did not answer within 60 s")


def compare(
    what: str, url: str, token: str, trees: dict[str, Path], args: argparse.Namespace,
    env: dict[str, str], server: Server | None = None,
) -> None:  # fmt: skip
    """Each tree in turn, the order alternating by round; one line per tree and round."""
    ratios = []
    for n in range(args.rounds):
        order = list(trees) if n % 2 == 0 else list(reversed(trees))
        ms = {}
        for name in order:
            before = server.connections if server else 0
            ms[name] = one_child(url, token, trees[name], args.batches, env)
            accepted = f", {server.connections - before} connections" if server else ""
            print(f"{what} round {n + 1} {name:8}: {ms[name]:.3f} ms/batch{accepted}", flush=True)
        ratios.append(ms["this"] / ms["baseline"])
    print(f"{what}: this / baseline = {statistics.median(ratios):.2f} "
          f"(rounds {' '.join(f'{r:.2f}' for r in ratios)})", flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline-tree", type=Path)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--gunicorn", action="store_true", help="the control plane too")
    parser.add_argument("--client")
    parser.add_argument("--token")
    parser.add_argument("--tree")
    args = parser.parse_args()
    if args.client:
        client(args.client, args.token, args.tree, args.batches)
        return 0
    if args.baseline_tree is None:
        parser.error("--baseline-tree is required")
    trees = {"this": ROOT, "baseline": args.baseline_tree.resolve()}
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        self_signed(Path(tmp))
        env = {**os.environ, "SSL_CERT_FILE": str(Path(tmp) / "cert.pem")}  # trust it
        cases = [
            ("http", None, True),
            ("https", Path(tmp), True),
            ("http, no NODELAY", None, False),
        ]
        for what, tls_dir, nodelay in cases:
            server = Server(tls_dir, nodelay)
            compare(what, server.url, "bp_bench", trees, args, env, server)
            server.close()
    if args.gunicorn:
        with gunicorn() as (url, token):
            compare("gunicorn", url, token, trees, args, dict(os.environ))
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
