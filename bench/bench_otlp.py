"""OTLP span ingest (``POST /v1/traces``) beside event ingest (``POST /api/v1/events``), measured
in the same run against the same gunicorn server and scratch database.

One command (PostgreSQL and Redis on this machine):

    .venv/bin/python bench/bench_otlp.py
    .venv/bin/python bench/bench_otlp.py --spans-per-export 100 --seconds 10 --clients 4

The workload is the scripted run of ``bench_ingest.py`` traced instead of reported: per run one
``invoke_agent`` span, 8 ``chat`` spans (tokens, no cost: priced from the genai-prices table, the
slower path) and 8 ``execute_tool`` spans (every third one failed), in the order an exporter sends
them (a span when it ends, so the agent span last), cut into exports of ``--spans-per-export``.
The events API gets the same runs as events in batches of the same size. The two are measured
alternately (events, OTLP protobuf, OTLP JSON, events again) so drift in the machine's load shows
as the difference between the two events rows. Every reply is checked (200, nothing rejected).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import STEPS_PER_RUN, batches, start_gunicorn
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from support.scratch import drop_database, free_port, manage, recreate_database, with_database

T0_NS = 1_796_000_000_000_000_000
SPANS_PER_RUN = 1 + 2 * STEPS_PER_RUN


@dataclass
class Result:
    what: str
    requests: int
    items: int
    seconds: float
    per_s: float
    p50_ms: float
    p99_ms: float


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def run_spans(prefix: int, run_no: int) -> list[dict[str, Any]]:
    trace = f"{prefix:08x}{run_no:024x}"
    start = T0_NS + run_no * 1_000_000_000
    spans: list[dict[str, Any]] = []
    for step in range(1, STEPS_PER_RUN + 1):
        at = start + step * 1_000_000_000
        spans.append({"trace": trace, "span": f"{step * 2:016x}", "name": "chat gpt-4o",
                      "start": at, "end": at + 400_000_000, "error": False, "attrs": {
                          "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                          "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 5200,
                          "gen_ai.usage.output_tokens": 310}})  # fmt: skip
        failed = step % 3 == 0
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "web_search"}
        if failed:
            attrs["error.type"] = "TimeoutError"
        spans.append({"trace": trace, "span": f"{step * 2 + 1:016x}",
                      "name": "execute_tool web_search", "start": at + 400_000_000,
                      "end": at + 800_000_000, "error": failed, "attrs": attrs})  # fmt: skip
    spans.append({"trace": trace, "span": f"{1:016x}", "name": "invoke_agent research",
                  "start": start, "end": start + (STEPS_PER_RUN + 1) * 1_000_000_000,
                  "error": False, "attrs": {"gen_ai.operation.name": "invoke_agent",
                                            "gen_ai.agent.name": "research"}})  # fmt: skip
    return spans


def export_request(worker: str, spans: list[dict[str, Any]]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend(
        [_kv("service.name", "research-agent"), _kv("service.instance.id", worker)]
    )
    scope = resource_spans.scope_spans.add()
    for item in spans:
        span = scope.spans.add()
        span.trace_id = bytes.fromhex(item["trace"])
        span.span_id = bytes.fromhex(item["span"])
        span.name = item["name"]
        span.kind = 1  # type: ignore[assignment]
        span.start_time_unix_nano = item["start"]
        span.end_time_unix_nano = item["end"]
        span.attributes.extend(_kv(k, v) for k, v in item["attrs"].items())
        if item["error"]:
            span.status.code = 2  # type: ignore[assignment]
    return request


def to_json(request: ExportTraceServiceRequest) -> bytes:
    import base64

    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in document["resourceSpans"]:
        for scope in resource_spans["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId"):
                    span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document).encode()


def exports(worker: str, prefix: int, size: int, encoding: str) -> Iterator[bytes]:
    pending: list[dict[str, Any]] = []
    run_no = 0
    while True:
        while len(pending) < size:
            pending += run_spans(prefix, run_no)
            run_no += 1
        chunk, pending = pending[:size], pending[size:]
        request = export_request(worker, chunk)
        yield request.SerializeToString() if encoding == "protobuf" else to_json(request)


Check = Callable[[int, bytes], str | None]


def check_events(status: int, payload: bytes, size: int) -> str | None:
    if status != 200:
        return f"{status}: {payload[:200]!r}"
    reply = json.loads(payload)
    if reply["accepted"] != size or reply["rejected"] or reply["duplicates"]:
        return f"unexpected reply: {str(reply)[:300]}"
    return None


def check_otlp(status: int, payload: bytes, encoding: str) -> str | None:
    if status != 200:
        return f"{status}: {payload[:200]!r}"
    if encoding == "json":
        rejected = int(json.loads(payload).get("partialSuccess", {}).get("rejectedSpans", 0))
    else:
        reply = ExportTraceServiceResponse()
        reply.ParseFromString(payload)
        rejected = reply.partial_success.rejected_spans
    return f"{rejected} spans rejected: {payload[:300]!r}" if rejected else None


def sender(port: int, path: str, headers: dict[str, str], bodies: Iterator[bytes],
           check: Callable[[int, bytes], str | None], stop_at: float, latencies: list[float],
           errors: list[str]) -> None:  # fmt: skip
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while time.monotonic() < stop_at:
        body = next(bodies)
        started = time.perf_counter()
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        latencies.append(time.perf_counter() - started)
        if (error := check(response.status, payload)) is not None:
            errors.append(error)
            return


def measure(what: str, port: int, token: str, size: int, args: argparse.Namespace) -> Result:
    tag = secrets.randbits(24)
    per_client: list[list[float]] = [[] for _ in range(args.clients)]
    errors: list[str] = []
    auth = {"Authorization": f"Bearer {token}"}

    def plan(i: int) -> tuple[str, dict[str, str], Iterator[bytes], Check]:
        worker = f"{what}-{tag:06x}-{i}"
        if what == "events":
            bodies = batches(worker, f"e{tag:06x}{i}", size)
            return ("/api/v1/events", auth | {"Content-Type": "application/json"}, bodies,
                    lambda s, p: check_events(s, p, size))  # fmt: skip
        encoding = what.removeprefix("otlp-")
        content_type = "application/json" if encoding == "json" else "application/x-protobuf"
        bodies = exports(worker, (tag << 4) | i, size, encoding)
        return ("/v1/traces", auth | {"Content-Type": content_type}, bodies,
                lambda s, p: check_otlp(s, p, encoding))  # fmt: skip

    started = time.monotonic()
    stop_at = started + args.seconds
    threads = []
    for i in range(args.clients):
        path, headers, bodies, check = plan(i)
        threads.append(threading.Thread(target=sender, args=(
            port, path, headers, bodies, check, stop_at, per_client[i], errors)))  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    if errors:
        raise SystemExit(f"{what}: {errors[0]}")
    latencies = sorted(lat for client in per_client for lat in client)
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    items = len(latencies) * size
    return Result(what, len(latencies), items, round(elapsed, 2), round(items / elapsed),
                  round(quantiles[49] * 1000, 1), round(quantiles[98] * 1000, 1))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--database-url", default=os.environ.get(
        "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))  # fmt: skip
    parser.add_argument("--bench-db", default="bp_bench_otlp")
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    )
    parser.add_argument("--spans-per-export", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    parser.add_argument("--clients", type=int, default=4, help="concurrent senders (workers)")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn worker processes")
    parser.add_argument("--worker-class", default="sync")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    db_url = with_database(args.database_url, args.bench_db)
    recreate_database(args.database_url, args.bench_db)
    env = os.environ | {
        "DATABASE_URL": db_url, "REDIS_URL": args.redis_url, "CELERY_BROKER_URL": args.redis_url,
        "DEBUG": "False", "SECRET_KEY": secrets.token_urlsafe(64), "DB_CONN_MAX_AGE": "600",
        "LOG_LEVEL": "WARNING",
    }  # fmt: skip
    server = None
    size = args.spans_per_export
    try:
        manage(env, "migrate", "--verbosity", "0")
        token = manage(env, "create_agent_token", "bench").strip().splitlines()[-1]
        port = free_port()
        server = start_gunicorn(env, port, args)
        measure("events", port, token, size, argparse.Namespace(**{**vars(args), "seconds": 1.0}))
        order = ["events", "otlp-protobuf", "otlp-json", "events"]
        results = [measure(what, port, token, size, args) for what in order]
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        drop_database(args.database_url, args.bench_db)

    baseline = statistics.mean([r.per_s for r in results if r.what == "events"])
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"\ngunicorn {args.workers} x {args.worker_class}, {args.clients} closed-loop senders, "
        f"{size} spans or events per request, {args.seconds:g} s each, {os.cpu_count()} cores, "
        f"load average after: {load}\n"
    )
    print("| endpoint | requests | spans or events | per s | p50 ms | p99 ms | vs events/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r.what} | {r.requests} | {r.items} | {r.per_s:,} | {r.p50_ms} | {r.p99_ms} "
              f"| {r.per_s / baseline:.0%} |")  # fmt: skip


if __name__ == "__main__":
    main()
