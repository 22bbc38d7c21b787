"""What 20 half-sent requests do to a normal request, per gunicorn worker model.

    .venv/bin/python bench/bench_slow_clients.py

Starts gunicorn (3 workers, like docker-compose.yml) once with ``sync`` workers and once with the
production config (``controlplane.gunicorn_conf``: gevent), opens ``--slow`` connections that send
half a request and then nothing, and times a ``GET /healthz`` (no database) behind them, with a
client timeout of ``--timeout`` seconds. A baseline GET without slow clients is measured first.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def timed_get(url: str, timeout: float) -> float | None:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            reply.read()
    except OSError:
        return None
    return time.perf_counter() - started


def run(model: str, slow: int, timeout: float) -> tuple[float | None, float | None]:
    port = free_port()
    env = {
        **os.environ, "DEBUG": "False", "TLS_PROXY": "False",
        "SECRET_KEY": secrets.token_urlsafe(64), "ALLOWED_HOSTS": "127.0.0.1",
        "GUNICORN_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "3",
    }  # fmt: skip
    if model == "sync":
        args = ["controlplane.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "3",
                "--worker-class", "sync", "--timeout", "30"]  # fmt: skip
    else:
        args = ["-c", "python:controlplane.gunicorn_conf", "controlplane.wsgi:application"]
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", *args], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        deadline = time.monotonic() + 60
        while timed_get(url, 1) is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"gunicorn ({model}) did not start")
            time.sleep(0.1)
        baseline = min(filter(None, (timed_get(url, timeout) for _ in range(5))))
        sockets = []
        for _ in range(slow):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            sockets.append(sock)
        time.sleep(0.5)  # let the workers pick the slow connections up first, as in an attack
        behind = timed_get(url, timeout)
        for sock in sockets:
            sock.close()
        return baseline, behind
    finally:
        process.terminate()
        process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--slow", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=40.0)
    args = parser.parse_args()
    print(f"{args.slow} half-sent requests; client timeout {args.timeout:g} s; "
          f"load {os.getloadavg()[0]:.2f}\n")  # fmt: skip
    print("| worker model | GET /healthz alone | behind the slow clients |")
    print("|---|---:|---:|")
    for model in ("sync", "gevent (controlplane.gunicorn_conf)"):
        baseline, behind = run(model.split()[0], args.slow, args.timeout)
        shown = (
            f"{behind * 1000:.0f} ms" if behind is not None else f"no answer in {args.timeout:g} s"
        )
        print(f"| {model} | {(baseline or 0) * 1000:.0f} ms | {shown} |")


if __name__ == "__main__":
    main()
