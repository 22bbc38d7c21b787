"""Fleet breaker benchmarks: the update cost inside ingest, and how fast an opening propagates.

One command (PostgreSQL and Redis on this machine; nothing else to start):

    .venv/bin/python bench/bench_fleet.py                  # both parts
    .venv/bin/python bench/bench_fleet.py --part cost --calls 20000
    .venv/bin/python bench/bench_fleet.py --part propagation --trials 100

It creates a scratch database (``--bench-db``, dropped at the end) and uses the Redis database of
``REDIS_URL`` (only keys of its own tools, deleted at the end).

Part ``cost``: one accepted retryable ``tool.call`` applied to its fleet breaker, timed at each
layer, next to ``redis-benchmark`` running the very same Lua script (same SHA, same keys, a fresh
event id per call) over one connection: the ratio says what our Python shell adds to the Redis
round trip. The failures come from one worker, so the breaker never opens (min workers 2) and
every call takes the longest path of the script (count, worker hash, streak list, dedupe key).
The ingest rows compare ``ingest_batch`` of one ``tool.call`` with the fleet hooks on and off.

Part ``propagation``: gunicorn (2 processes, gthread) serves the control plane; SDK
``ControlPlane`` clients play agent workers: A, and ``--workers`` others (B). Per trial a fresh
tool gets four failures from a third worker, then worker A records the fifth, which opens the fleet
breaker; A flushes on its own thread while each B's ``run.available()`` is checked every
millisecond until it leaves the tool out. Every (trial, B) pair is one sample, timed from A's
``flush()``, from the opening as the server timed its transition, and from A's reply. Trials start
at random phases of the poll. Run in the same invocation, each against a fresh gunicorn: ``push``
(long-poll on ``GET /api/v1/fleet?wait=20``, the SDK default), ``push, watcher polling`` (the same
with the server's change announcements off, ``BREAKER_FLEET_WATCH_ANNOUNCED=False``: its watcher's
25 ms poll alone), or with ``--baseline-tree DIR`` the same push against DIR's server (another
checkout: the code before a change), alternated ``--rounds`` times, then ``poll``
(``fleet_wait=0``, the 1 s poll the SDK falls back to), so the ratios are measured under the same
load.
Goal (issue 14): p99 under 250 ms with push and 50 workers.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from support.scratch import add_database_arguments, free_port, manage, scratch_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PYTHON = sys.executable
BENCH_TOOL = "bench_fleet_tool"


# --- scratch database and servers ----------------------------------------------------------------


def setup_django(db_url: str) -> None:
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()


def delete_bench_keys() -> None:
    from breakers.fleet_service import fleet_store

    store = fleet_store()
    for pattern in ("bp:{bench_fleet*", "bp:{prop-*", "bp:{trials-*", "bp:{rogue-*"):
        keys = list(store.client.scan_iter(match=pattern, count=1000))
        for start in range(0, len(keys), 1000):
            store.client.delete(*keys[start : start + 1000])
    ours = [
        name
        for name in store.tools()
        if name.startswith((BENCH_TOOL, "prop-", "trials-", "rogue-"))
    ]
    if ours:
        store.client.srem(store.tools_key, *ours)


# --- part 1: the update cost ---------------------------------------------------------------------


@dataclass
class Timing:
    label: str
    samples_us: list[float]

    def row(self, baseline_p50_us: float | None) -> str:
        # The ratio is of medians: on a shared machine the means follow whoever else is busy.
        ordered = sorted(self.samples_us)
        mean = statistics.fmean(ordered)
        p50 = ordered[len(ordered) // 2]
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        ratio = f"{p50 / baseline_p50_us:.1f}x" if baseline_p50_us else "-"
        return f"| {self.label} | {len(ordered)} | {mean:.1f} | {p50:.1f} | {p99:.1f} | {ratio} |"


def time_calls(label: str, calls: int, step: Callable[[int], object]) -> Timing:
    for i in range(min(2000, calls // 10)):  # warm up: connections, script cache, branch caches
        step(-1 - i)
    samples = []
    for i in range(calls):
        started = time.perf_counter_ns()
        step(i)
        samples.append((time.perf_counter_ns() - started) / 1000)
    return Timing(label, samples)


def redis_benchmark(
    calls: int, clients: int, sha: str, keys: list[str], args: list[str]
) -> dict[str, float]:
    from django.conf import settings

    url = urlsplit(settings.REDIS_URL)
    db = (url.path or "/0").lstrip("/") or "0"
    command = [
        "redis-benchmark", "-h", url.hostname or "127.0.0.1", "-p", str(url.port or 6379),
        "--dbnum", db, "-n", str(calls), "-c", str(clients), "-r", "100000000000", "--csv",
        "EVALSHA", sha, str(len(keys)), *keys, *args,
    ]  # fmt: skip
    out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=600).stdout
    # The "test" column is the command, whose JSON argument has quotes that CSV does not
    # escape: the figures are read from the end of the line.
    lines = out.strip().splitlines()
    names = next(csv.reader(io.StringIO(lines[0])))[1:]
    values = lines[-1].rsplit(",", len(names))[1:]
    return {name: float(value.strip('"')) for name, value in zip(names, values, strict=True)}


def measure_cost(calls: int) -> list[str]:
    from breakers import fleet_service
    from runs.services import ingest_batch
    from scripts.testing.fleet_calls import fleet_call

    store = fleet_service.fleet_store()
    fleet_service.fleet_record_tool_calls(calls=[fleet_call("warm", BENCH_TOOL, "w1", "retryable")])
    ids = itertools.count()

    def via_store(_: int) -> object:
        event = fleet_call(f"s{next(ids)}", BENCH_TOOL, "w1", "retryable")
        return store.apply(BENCH_TOOL, [event], now=1_700_000_000_000)

    def via_service(_: int) -> object:
        call = fleet_call(f"v{next(ids)}", BENCH_TOOL, "w1", "retryable")
        return fleet_service.fleet_record_tool_calls(calls=[call])

    store_timing = time_calls("`FleetStore.apply` (redis-py EVALSHA)", calls, via_store)
    service_timing = time_calls(
        "`fleet_record_tool_calls` (what ingest's hook runs)", calls, via_service
    )
    reply_timing = time_calls(
        "`fleet_state` (every ingest reply; 1 tool)",
        calls // 4,
        lambda _: fleet_service.fleet_state(),
    )

    # Ingest of one tool.call with the fleet hooks and with them stubbed out, interleaved call by
    # call so that the load of a shared machine falls on both alike.
    import runs.services as ingest

    ingest_batch(worker_id="w1", events=[_run_started("bench-run")])
    hooks = ingest.apply_fleet_outcomes, ingest.fleet_state_for_reply
    stubs = (lambda *, tool_calls, model_calls=(): None), (lambda: {"version": 0, "tools": {}})
    with_fleet = Timing("`ingest_batch`, 1 tool.call, fleet hooks on", [])
    without = Timing("`ingest_batch`, 1 tool.call, fleet hooks off", [])
    in_place = Timing("both fleet hooks, timed inside those `ingest_batch` calls", [])
    spent: list[float] = []

    def timed_apply(*, tool_calls: Any, model_calls: Any = ()) -> None:
        started = time.perf_counter_ns()
        hooks[0](tool_calls=tool_calls, model_calls=model_calls)
        spent.append((time.perf_counter_ns() - started) / 1000)

    def timed_reply() -> dict[str, Any]:
        started = time.perf_counter_ns()
        state = hooks[1]()
        spent.append((time.perf_counter_ns() - started) / 1000)
        return state

    try:
        for i in range(max(500, calls // 10) + 100):
            for timing, (apply_hook, reply_hook) in (
                (with_fleet, (timed_apply, timed_reply)),
                (without, stubs),
            ):
                ingest.apply_fleet_outcomes = apply_hook  # type: ignore[assignment]
                ingest.fleet_state_for_reply = reply_hook  # type: ignore[assignment]
                spent.clear()
                started = time.perf_counter_ns()
                ingest_batch(worker_id="w1", events=[_tool_call("bench-run", next(ids))])
                if i >= 100:  # the first ones warm up
                    timing.samples_us.append((time.perf_counter_ns() - started) / 1000)
                    if spent:
                        in_place.samples_us.append(sum(spent))
    finally:
        ingest.apply_fleet_outcomes, ingest.fleet_state_for_reply = hooks

    keys = [*store.tool_keys(BENCH_TOOL), store.dedupe_key(BENCH_TOOL, "__rand_int__")]
    # As FleetStore.apply sends it: the calls as one JSON array (event id, voter, outcome,
    # trial, holder); redis-benchmark puts a fresh number in place of each __rand_int__.
    argv = [
        "1700000000000", *(str(v) for v in store._policy_args(0)[1:]),
        str(store.dedupe_ttl_ms), json.dumps(["__rand_int__", "w1", "retryable", False, "w1"]),
    ]  # fmt: skip
    sha = store._scripts["apply"].sha
    one = redis_benchmark(calls, 1, sha, keys, argv)
    many = redis_benchmark(calls * 5, 50, sha, keys, argv)
    baseline_us = one["p50_latency_ms"] * 1000
    rb = Timing("`redis-benchmark` EVALSHA, same script, 1 connection", [])

    lines = [
        "| layer | calls | mean µs | p50 µs | p99 µs | p50 vs redis-benchmark |",
        "|---|---:|---:|---:|---:|---:|",
        f"| {rb.label} | {calls} | {one['avg_latency_ms'] * 1000:.1f} | {baseline_us:.1f} "
        f"| {one['p99_latency_ms'] * 1000:.1f} | 1x |",
        store_timing.row(baseline_us),
        service_timing.row(baseline_us),
        reply_timing.row(baseline_us),
        in_place.row(baseline_us),
        with_fleet.row(None),
        without.row(None),
    ]
    on, off = statistics.median(with_fleet.samples_us), statistics.median(without.samples_us)
    inside = statistics.median(in_place.samples_us)
    lines += [
        "",
        f"Fleet cost inside one ingest request of one event: {inside:.0f} µs timed in place "
        f"({inside / on:.0%} of it); hooks on minus hooks off: {on - off:.0f} µs (medians).",
        f"Redis capacity for this script: {many['rps']:,.0f} calls/s with 50 connections "
        f"(`redis-benchmark -c 50`, p99 {many['p99_latency_ms']:.2f} ms).",
    ]
    return lines


def measure_spend_cost(calls: int) -> list[str]:
    """Ingest of a batch of one model call and one failed tool call (a new run each time), with
    the spend rule off (the default: one SMEMBERS) and on (every tool: two scripts), in
    alternating blocks so the load of a shared machine falls on both alike. One worker: the
    rule never opens the tool, so every call takes the longest path of both scripts."""
    from django.test import override_settings

    from runs.services import ingest_batch

    runs = [f"spend-run-{i}" for i in range(calls + 200)]
    for start in range(0, len(runs), 500):
        ingest_batch(worker_id="w1", events=[_run_started(r) for r in runs[start : start + 500]])
    on = Timing("`ingest_batch`, model.call + tool.call, spend rule on", [])
    off = Timing("`ingest_batch`, model.call + tool.call, spend rule off (default)", [])
    block = 50
    for index, start in enumerate(range(0, len(runs), block)):
        timing = on if index % 2 else off
        rule = override_settings(BREAKER_SPEND_AMOUNT_USD=1000.0 if timing is on else 0.0)
        rule.enable()
        try:
            for run_id in runs[start : start + block]:
                events = [_model_call(run_id), _tool_call(run_id, 0)]
                started = time.perf_counter_ns()
                ingest_batch(worker_id="w1", events=events)
                if start >= 200:  # the first blocks warm up
                    timing.samples_us.append((time.perf_counter_ns() - started) / 1000)
        finally:
            rule.disable()
    p_on, p_off = statistics.median(on.samples_us), statistics.median(off.samples_us)
    return [
        "| layer | calls | mean µs | p50 µs | p99 µs | |",
        "|---|---:|---:|---:|---:|---:|",
        off.row(None),
        on.row(None),
        "",
        f"The spend rule on adds {p_on - p_off:.0f} µs to the median of such a batch "
        f"({p_on / p_off:.2f}x).",
    ]


def _model_call(run_id: str) -> dict[str, Any]:
    return {"id": f"{run_id}-m", "type": "model.call", "ts": _now_iso(), "run_id": run_id,
            "input_tokens": 5200, "output_tokens": 310, "cost_usd": 0.061}  # fmt: skip


def _run_started(run_id: str) -> dict[str, Any]:
    return {"id": f"{run_id}-s", "type": "run.started", "ts": "2026-11-29T09:00:00Z",
            "run_id": run_id, "agent": "bench", "step_budget": 20}  # fmt: skip


def _tool_call(run_id: str, n: int) -> dict[str, Any]:
    return {"id": f"{run_id}-t{n}", "type": "tool.call", "ts": "2026-11-29T09:00:01Z",
            "run_id": run_id, "step": 1, "tool": BENCH_TOOL, "outcome": "retryable",
            "attempts": 1, "error": "ToolFailure: 503"}  # fmt: skip


# --- part 2: propagation -----------------------------------------------------------------------


def start_gunicorn(
    env: dict[str, str], port: int, threads: int = 4, tree: Path = ROOT
) -> subprocess.Popen[bytes]:
    command = [
        PYTHON, "-m", "gunicorn", "controlplane.wsgi", "--bind", f"127.0.0.1:{port}",
        "--workers", "2", "--threads", str(threads), "--log-level", "warning", "--timeout", "60",
    ]  # fmt: skip
    server = subprocess.Popen(command, cwd=tree, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return server
        except urllib.error.HTTPError:
            return server  # it answers (a tree without /healthz: a 404 is an answer)
        except OSError:
            time.sleep(0.1)
    server.terminate()
    raise SystemExit("gunicorn did not answer within 30 s")


def post_events(url: str, token: str, worker: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    request = urllib.request.Request(
        url + "/api/v1/events",
        data=json.dumps({"worker_id": worker, "events": events}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        reply: dict[str, Any] = json.loads(response.read())
    return reply


def measure_propagation(url: str, token: str, trials: int, workers: int, sync: str) -> list[str]:
    from breaker_panel import ToolFailure
    from breaker_panel.client import ControlPlane, PlaneConfig  # the agents' real client

    wait = 20.0 if sync.startswith("push") else 0.0
    # Worker A reports the failure that opens the breaker; the B workers are the others whose
    # available() must drop the tool. A raw HTTP reporter supplies the first four failures from
    # a third worker, so the opening failure is A's and no B reports anything in a trial.
    key = f"{sync.split(',')[0]}-{secrets.token_hex(3)}"  # tools and workers new in each round
    plane_a = ControlPlane(
        url, token=token, worker_id=f"bench-a-{key}", config=PlaneConfig(fleet_wait=wait)
    )
    planes_b = [
        ControlPlane(
            url, token=token, worker_id=f"bench-b{i}-{key}", config=PlaneConfig(fleet_wait=wait)
        )
        for i in range(workers)
    ]
    run_a = plane_a.start_run(agent="bench", step_budget=20)
    runs_b = [plane.start_run(agent="bench", step_budget=20) for plane in planes_b]
    post_events(url, token, "bench-c", [_run_started(f"bench-c-run-{key}")])
    for plane in (plane_a, *planes_b):
        plane.flush()
    from breakers.models import FleetTransition

    from_send, from_ack, from_open = [], [], []
    spans: list[tuple[float, float]] = []  # per trial: flush() to the open, and to the reply
    try:
        for trial in range(trials):
            tool = f"prop-{key}-{trial}"
            tools = [{"type": "function", "function": {"name": tool}}]
            failures = [_prop_call(f"bench-c-run-{key}", tool, f"{trial}-{i}") for i in range(4)]
            post_events(url, token, "bench-c", failures)
            assert all(run.available(tools) == tools for run in runs_b)
            time.sleep(random.uniform(0, 1.0))  # land anywhere in the B's poll cycles
            run_a.record_failure(tool, ToolFailure("503 from vendor", retryable=True))
            sent, sent_wall = time.perf_counter(), time.time()
            # A flushes on its own thread, as an agent's sender would: the B are checked from
            # the moment A sends, not from when its reply returns.
            reply: list[tuple[bool, float]] = []
            flushing = threading.Thread(target=_flush_into, args=(plane_a, reply))
            flushing.start()
            deadline = sent + 10
            waiting, seen_wall, seen_send = set(range(workers)), [], []
            while waiting and time.perf_counter() < deadline:
                for i in [i for i in waiting if not runs_b[i].available(tools)]:
                    removed = time.perf_counter()
                    seen_wall.append(time.time())
                    seen_send.append(removed - sent)
                    waiting.discard(i)
                time.sleep(0.001)
            flushing.join()
            if not reply[0][0]:
                raise SystemExit(f"trial {trial}: worker A's failure was not acknowledged")
            if waiting:
                raise SystemExit(
                    f"trial {trial}: {len(waiting)} workers still had the tool after 10 s"
                )
            acknowledged = reply[0][1]
            from_ack += [sent + seen - acknowledged for seen in seen_send]
            # The open as the server timed it (its clock, the one the transition row keeps: the
            # same machine's as ours, to the millisecond).
            opened = FleetTransition.objects.get(tool__name=tool, to_state="open").at.timestamp()
            from_open += [seen - opened for seen in seen_wall]
            from_send += seen_send
            spans.append((opened - sent_wall, acknowledged - sent))
            # A removed tool stays removed for the run: each B starts a fresh run for the next
            # trial, sent at once so that no ingest reply to a B (which carries the fleet state
            # too) lands inside the next measurement: only the fleet sync is measured.
            runs_b = [plane.start_run(agent="bench", step_budget=20) for plane in planes_b]
            for plane in planes_b:
                plane.flush()
    finally:
        for plane in (plane_a, *planes_b):
            plane.close()

    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000

    samples = len(from_send)
    return [
        f"| {sync} | worker A's `flush()` of the opening failure | {trials} x {workers} "
        f"| {pct(from_send, 0.5):.0f} | {pct(from_send, 0.99):.0f} | {max(from_send) * 1000:.0f} |",
        f"| {sync} | A's reply (negative: the B had it first) | {samples} "
        f"| {pct(from_ack, 0.5):.0f} | {pct(from_ack, 0.99):.0f} | {max(from_ack) * 1000:.0f} |",
        f"| {sync} | the opening (the server's time of the transition) | {samples} "
        f"| {pct(from_open, 0.5):.0f} | {pct(from_open, 0.99):.0f} "
        f"| {max(from_open) * 1000:.0f} |",
        f"| {sync} | (A's `flush()` to the open; to its reply) | {trials} "
        f"| {pct([a for a, _ in spans], 0.5):.0f}; {pct([b for _, b in spans], 0.5):.0f} "
        f"| {pct([a for a, _ in spans], 0.99):.0f}; {pct([b for _, b in spans], 0.99):.0f} "
        f"| {max(a for a, _ in spans) * 1000:.0f}; {max(b for _, b in spans) * 1000:.0f} |",
    ]


def _flush_into(plane: Any, reply: list[tuple[bool, float]]) -> None:
    reply.append((plane.flush(), time.perf_counter()))


def _prop_call(run_id: str, tool: str, n: str) -> dict[str, Any]:
    return {**_tool_call(run_id, 0), "id": f"{run_id}-{n}-{secrets.token_hex(4)}", "tool": tool}


# --- part 3: fleet at scale: one trial per half-open cycle, and a misbehaving token ----------


@dataclass
class Fleet:
    """``workers`` agent workers, one ControlPlane each on its own thread, against one server."""

    url: str
    tokens: list[str]  # per worker (the same one repeated for a shared token)
    workers: list[str]

    def planes(self) -> list[Any]:
        from breaker_panel.client import ControlPlane, PlaneConfig

        # No worker-scope breakers (a worker's own trial failures would trip its own): only the
        # fleet's decisions are measured.
        config = PlaneConfig(
            flush_interval=0.5, trial_retry_interval=0.2, timeout=5.0, scopes=("run", "fleet")
        )
        return [
            ControlPlane(self.url, token=token, worker_id=worker, config=config)
            for token, worker in zip(self.tokens, self.workers, strict=True)
        ]


def bench_tokens(kind: str, workers: list[str]) -> list[str]:
    from runs.models import AgentToken

    if kind == "shared":  # one unbound token for every worker: one voter, 64 lease holders
        return [AgentToken.issue(name=f"bench shared {secrets.token_hex(3)}")[1]] * len(workers)
    return [AgentToken.issue(name=f"bench {w}", worker_id=w)[1] for w in workers]


def open_with_two_tokens(url: str, tool: str) -> None:
    """Two bound tokens (two voters) open ``tool``: 3 + 2 retryable failures."""
    from runs.models import AgentToken

    for worker, count in (("opener-1", 3), ("opener-2", 2)):
        worker = f"{worker}-{secrets.token_hex(3)}"
        token = AgentToken.issue(name=f"bench {worker}", worker_id=worker)[1]
        run_id = f"{worker}-run"
        calls = [{**_prop_call(run_id, tool, str(n)), "ts": _now_iso()} for n in range(count)]
        post_events(url, token, worker, [_run_started(run_id), *calls])


def _now_iso() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def measure_trials(url: str, kind: str, workers: int, cycles: int, label: str) -> list[str]:
    """(a) ``cycles`` half-open windows of a tool without a probe whose every trial fails (so it
    re-opens at once, cooldown 0.5 s); every worker starts short runs while it sees the tool
    half-open and calls it when a run offers it. Each call is put in the half-open window whose
    server-side interval holds it: exactly one per window is the goal."""
    from breaker_panel import ToolFailure
    from breakers.fleet_service import fleet_tick, tool_policy_update
    from breakers.models import FleetTransition, Tool

    key = secrets.token_hex(3)
    tool = f"trials-{key}"
    tools = [{"type": "function", "function": {"name": tool}}]
    Tool.objects.create(name=tool)
    tool_policy_update(
        tool_name=tool,
        changes={"cooldown_seconds": 0.5, "max_cooldown_seconds": 0.5},
        actor="bench",
    )
    names = [f"trial-w{i}-{key}" for i in range(workers)]
    fleet = Fleet(url, bench_tokens(kind, names), names)
    planes = fleet.planes()
    calls: list[tuple[float, str]] = []
    lock, stop = threading.Lock(), threading.Event()
    down = ToolFailure("503 from vendor", retryable=True)

    def worker(plane: Any) -> None:
        while not stop.is_set():
            status = plane.fleet.snapshot().get(tool)
            if status is None or str(status.state) != "half_open":
                time.sleep(0.02)
                continue
            with plane.start_run(agent="bench", step_budget=20) as run:
                if run.available(tools):
                    with lock:
                        calls.append((time.time(), plane.worker_id))
                    run.record_failure(tool, down)
            time.sleep(random.uniform(0.05, 0.15))

    def decided() -> int:
        return FleetTransition.objects.filter(tool__name=tool, from_state="half_open").count()

    threads = [threading.Thread(target=worker, args=(p,), daemon=True) for p in planes]
    load_before = os.getloadavg()
    started = time.monotonic()
    open_with_two_tokens(url, tool)
    for thread in threads:
        thread.start()
    deadline = started + 30 + cycles * 10
    try:
        while decided() < cycles and time.monotonic() < deadline:
            fleet_tick()  # Celery beat's tick, every 50 ms here
            time.sleep(0.05)
        time.sleep(1.0)  # calls of the last window still in flight are counted too
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        for plane in planes:
            plane.close(timeout=5)
    elapsed = time.monotonic() - started
    load_after = os.getloadavg()
    rows = list(
        FleetTransition.objects.filter(tool__name=tool)
        .order_by("seq")
        .values_list("to_state", "at")
    )
    windows = [
        (at.timestamp(), rows[i + 1][1].timestamp())
        for i, (state, at) in enumerate(rows[:-1])
        if state == "half_open"
    ]
    per_window = [sum(start <= t <= end for t, _ in calls) for start, end in windows]
    outside = len(calls) - sum(per_window)
    delays = sorted(
        min(t for t, _ in calls if start <= t <= end) - start
        for (start, end), n in zip(windows, per_window, strict=True)
        if n
    )
    for (start, end), n in zip(windows, per_window, strict=True):
        if n > 1:  # who called, when (ms after the window opened): for the reader to diagnose
            who = [(w, round((t - start) * 1000)) for t, w in calls if start <= t <= end]
            print(f"{label}: window of {round((end - start) * 1000)} ms, calls {who}", flush=True)
    spread = {n: per_window.count(n) for n in sorted(set(per_window))}
    callers = len({w for _, w in calls})

    def pct(values: list[float], q: float) -> str:
        return f"{values[min(len(values) - 1, int(len(values) * q))] * 1000:.0f}" if values else "-"

    return [
        f"| {label} | {len(windows)} | {spread.get(1, 0)} | {spread.get(0, 0)} "
        f"| {sum(c for n, c in spread.items() if n > 1)} | {max(per_window, default=0)} "
        f"| {outside} | {callers} | {pct(delays, 0.5)}; {pct(delays, 0.99)} | {elapsed:.0f} "
        f"| {load_before[0]:.1f} → {load_after[0]:.1f} |"
    ]


def measure_rogue(url: str, workers: int, seconds: float, rogue_ids: int, label: str) -> list[str]:
    """(b) A healthy tool: ``workers`` workers (bound tokens) each start a run a second and call
    it successfully, while one unbound token posts batches of 5 retryable failures as
    ``rogue_ids`` invented worker ids in turn. Counts the opens of the tool."""
    from breakers.models import FleetTransition, Tool
    from runs.models import AgentToken

    key = secrets.token_hex(3)
    tool = f"rogue-{key}"
    tools = [{"type": "function", "function": {"name": tool}}]
    Tool.objects.create(name=tool)
    names = [f"healthy-w{i}-{key}" for i in range(workers)]
    planes = Fleet(url, bench_tokens("bound", names), names).planes()
    rogue = AgentToken.issue(name=f"bench rogue {key}")[1]
    stop = threading.Event()
    sent = {"failures": 0, "successes": 0, "batches": 0}
    lock = threading.Lock()

    def worker(plane: Any) -> None:
        time.sleep(random.uniform(0, 1.0))
        while not stop.is_set():
            with plane.start_run(agent="bench", step_budget=20) as run:
                if run.available(tools):
                    run.record_success(tool)
                    with lock:
                        sent["successes"] += 1
            time.sleep(1.0)

    def misbehave() -> None:
        n = 0
        while not stop.is_set():
            fake = f"rogue-{n % rogue_ids}-{key}"
            run_id = f"{fake}-run-{n}"
            failures = [{**_prop_call(run_id, tool, str(i)), "ts": _now_iso()} for i in range(5)]
            post_events(url, rogue, fake, [_run_started(run_id), *failures])
            sent["failures"] += 5
            sent["batches"] += 1
            n += 1
            time.sleep(0.05)

    threads = [threading.Thread(target=worker, args=(p,), daemon=True) for p in planes]
    threads.append(threading.Thread(target=misbehave, daemon=True))
    load_before = os.getloadavg()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(15)
    for plane in planes:
        plane.close(timeout=5)
    load_after = os.getloadavg()
    opens = FleetTransition.objects.filter(tool__name=tool, to_state="open").count()
    return [
        f"| {label} | {seconds:.0f} | {sent['batches']} x 5 from {rogue_ids} ids "
        f"| {sent['successes']} | **{opens}** | {load_before[0]:.1f} → {load_after[0]:.1f} |"
    ]


def run_at_scale(args: argparse.Namespace, env: dict[str, str]) -> list[str]:
    held = args.workers + 1
    server_env = env | {"BREAKER_FLEET_MAX_WAITERS": str(held), "DB_CONN_MAX_AGE": "0"}
    report: list[str] = []

    def with_server(extra: dict[str, str], tree: Path, measure: Callable[[str], list[str]]) -> None:
        port = free_port()
        server = start_gunicorn(server_env | extra, port, threads=held + 4, tree=tree)
        try:
            rows = measure(f"http://127.0.0.1:{port}")
            print("\n".join(rows), flush=True)  # kept if a later variant fails
            report.extend(rows)
        finally:
            server.terminate()
            server.wait(30)

    if args.part in ("trials", "scale"):
        report += [
            f"(a) {args.workers} workers, {args.cycles} half-open cycles each; gunicorn 2 x "
            f"{held + 4} threads\n",
            "| tokens | windows | with 1 trial call | with 0 | with 2+ | most in one "
            "| calls outside a window | workers that called | half-open to the call, p50; "
            "p99 ms | s | load avg (1 min) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        variants = [
            ("bound", ROOT, "one bound token per worker"),
            ("shared", ROOT, "one shared token"),
        ]
        if args.baseline_tree:
            variants.append(("shared", args.baseline_tree, "one shared token, baseline tree"))
        for kind, tree, label in variants:
            with_server(
                {},
                tree,
                lambda url, kind=kind, label=label: measure_trials(
                    url, kind, args.workers, args.cycles, label
                ),
            )
        report.append("")
    if args.part in ("rogue", "scale"):
        report += [
            f"(b) {args.workers} healthy workers (bound tokens) and one misbehaving token\n",
            "| quorum | s | misbehaving failures | healthy successes | opens | load avg (1 min) |",
            "|---|---:|---|---:|---:|---|",
        ]
        for quorum in ("tokens", "workers"):
            label = f"`FLEET_QUORUM={quorum}`" + (" (default)" if quorum == "tokens" else "")
            with_server(
                {"FLEET_QUORUM": quorum},
                ROOT,
                lambda url, label=label: measure_rogue(
                    url, args.workers, args.seconds, args.rogue_ids, label
                ),
            )
    return report


# --- main ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    add_database_arguments(parser, "fleet", redis_url=False)
    parser.add_argument(
        "--part",
        choices=["cost", "propagation", "both", "trials", "rogue", "scale", "spend"],
        default="both",
        help="both: cost and propagation; scale: trials and rogue",
    )
    parser.add_argument("--cycles", type=int, default=20, help="half-open cycles (trials)")
    parser.add_argument("--seconds", type=float, default=20.0, help="duration (rogue)")
    parser.add_argument("--rogue-ids", type=int, default=20, help="invented worker ids (rogue)")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--workers", type=int, default=50, help="agent workers that must see it")
    parser.add_argument(
        "--rounds", type=int, default=1, help="push here and in the baseline, alternated"
    )
    parser.add_argument(
        "--no-poll", dest="poll", action="store_false", help="skip the 1 s poll variant"
    )
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="a checkout whose server is the push baseline (e.g. `git archive` of main)",
    )
    args = parser.parse_args()

    with scratch_database(args.database_url, args.bench_db) as db_url:
        env = os.environ | {"DATABASE_URL": db_url, "DEBUG": "False", "LOG_LEVEL": "WARNING",
                            "SECRET_KEY": secrets.token_urlsafe(64),
                            "TLS_PROXY": "False"}  # fmt: skip
        manage(env, "migrate", "--verbosity", "0")
        setup_django(db_url)
        report = [f"{os.cpu_count()} cores, Redis {_redis_version()} and PostgreSQL on localhost\n"]
        try:
            if args.part in ("cost", "both"):
                report += [*measure_cost(args.calls), ""]
            if args.part == "spend":
                report += [*measure_spend_cost(args.calls), ""]
            if args.part in ("propagation", "both"):
                token = manage(env, "create_agent_token", "bench").strip().splitlines()[-1]
                # Every worker may hold a long-poll: threads for all of them, plus ingest's.
                held = args.workers + 1
                # Connections per request: 2 x (held + 4) threads each keeping one would pass
                # PostgreSQL's default max_connections (100).
                # One bench token plays every worker: the opt-in worker quorum (the default
                # counts tokens, and one token would never open the breaker).
                server_env = env | {
                    "BREAKER_FLEET_MAX_WAITERS": str(held),
                    "DB_CONN_MAX_AGE": "0",
                    "FLEET_QUORUM": "workers",
                }
                report += [
                    f"{args.workers} workers (B) besides A; gunicorn 2 x {held + 4} threads\n",
                    "| fleet sync | measured from | samples | p50 ms | p99 ms | max ms |",
                    "|---|---|---:|---:|---:|---:|",
                ]
                # Push with this tree's server and with the baseline's (another checkout, say
                # the commit before a change; without one, this tree with the announcements
                # off), alternating so both see the same load; then poll.
                if args.baseline_tree:
                    baseline = ("push, baseline tree", args.baseline_tree, {})
                else:
                    off = {"BREAKER_FLEET_WATCH_ANNOUNCED": "False"}
                    baseline = ("push, watcher polling", ROOT, off)
                variants = [("push", ROOT, {}), baseline] * args.rounds
                polled = [("poll", ROOT, {})] if args.poll else []
                for sync, tree, extra in [*variants, *polled]:
                    port = free_port()
                    server = start_gunicorn(server_env | extra, port, threads=held + 4, tree=tree)
                    try:
                        rows = measure_propagation(
                            f"http://127.0.0.1:{port}", token, args.trials, args.workers, sync
                        )
                        print("\n".join(rows), flush=True)  # kept if a later variant fails
                        report += rows
                    finally:
                        server.terminate()
                        server.wait(30)
            if args.part in ("trials", "rogue", "scale"):
                report += run_at_scale(args, env)
        finally:
            delete_bench_keys()
            from django.db import connections

            connections.close_all()
    print("\n".join(report))


def _redis_version() -> str:
    from breakers.fleet_service import fleet_store

    return str(fleet_store().client.info("server")["redis_version"])


if __name__ == "__main__":
    main()
