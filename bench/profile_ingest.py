"""In-process CPU of one ingest batch, by phase, on either writer (no HTTP server, no load).

    .venv/bin/python bench/profile_ingest.py --writer postgres --batches 200
    .venv/bin/python bench/profile_ingest.py --writer sqlite --profile /tmp/ingest.prof

Each batch goes through Django's test client (middleware, ninja, the token lookup, the view), with
the workload of bench/bench_ingest.py (18-event scripted runs cut into batches, so some events name
runs started by an earlier batch). Per batch it prints the median CPU time of the whole request
(``time.thread_time()``) and of each ingest phase, wrapped where the tree has it, so the same script
can time an older checkout: run it with that tree as the working directory (``--root``).

With ``--callgrind`` (run under ``valgrind --tool=callgrind --instr-atstart=no``, as
bench/count_ingest_instructions.py does) no phase is wrapped and callgrind counts instructions
only over the measured batches: a figure that machine load does not move.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import secrets
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ingest import batches, drop_database, recreate_database, with_database

# Phases, as (module, attribute) of the tree under test; missing ones are skipped (older trees).
PHASES = (
    ("runs.services", "parse_batch"),
    ("runs.services", "validate_events"),
    ("runs.services", "fleet_ready"),
    ("runs.writers", "PostgresWriter.claim"),
    ("runs.writers", "OrmWriter.claim"),
    ("runs.services", "_plan"),
    ("runs.writers", "PostgresWriter.write"),
    ("runs.writers", "OrmWriter.write"),
    ("runs.services", "apply_fleet_outcomes"),
    ("runs.services", "fleet_state_for_reply"),
)


def _wrap(spent: dict[str, list[float]], name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            spent[name].append(time.thread_time() - started)

    return timed


def _install_timers(spent: dict[str, list[float]]) -> list[str]:
    found = []
    for module_name, attribute in PHASES:
        target = _resolve(module_name, attribute)
        if target is None:
            continue
        owner, leaf = target
        setattr(owner, leaf, _wrap(spent, attribute, getattr(owner, leaf)))
        found.append(attribute)
    return found


def _resolve(module_name: str, attribute: str) -> tuple[Any, str] | None:
    """The object holding a dotted attribute (``Class.method``) of a module and its last name;
    None where this tree has no such thing (the older trees lack some phases)."""
    import importlib

    owner: Any = importlib.import_module(module_name)
    *path, leaf = attribute.split(".")
    for part in path:
        owner = getattr(owner, part, None)
    if owner is None or not hasattr(owner, leaf):
        return None
    return owner, leaf


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the tree to time")
    parser.add_argument("--writer", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--database-url", default=os.environ.get(
        "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))  # fmt: skip
    parser.add_argument(
        "--bench-db", default=os.environ.get("TEST_DATABASE_NAME", "bp") + "_profile_ingest"
    )
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    )
    parser.add_argument("--profile", type=Path, help="also run cProfile and write the stats here")
    parser.add_argument("--top", type=int, default=25, help="cProfile lines to print")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--callgrind-phases",
        action="store_true",
        help="with --callgrind: also dump at every phase's entry and exit (labelled A -> B)",
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="under valgrind --tool=callgrind --instr-atstart=no: instrument only the measured "
        "batches (no phase timers), dumped as 'measured batches'",
    )
    args = parser.parse_args()

    root = args.root.resolve()
    sys.path.insert(0, str(root))
    os.chdir(root)
    scratch = tempfile.mkdtemp(prefix="bp-profile-")
    if args.writer == "postgres":
        db_url = with_database(args.database_url, args.bench_db)
        recreate_database(args.database_url, args.bench_db)
    else:
        db_url = f"sqlite:///{scratch}/ingest.sqlite3"
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "controlplane.settings", "DATABASE_URL": db_url,
        "REDIS_URL": args.redis_url, "CELERY_BROKER_URL": args.redis_url, "DEBUG": "False",
        "SECRET_KEY": secrets.token_urlsafe(64), "TLS_PROXY": "False", "LOG_LEVEL": "WARNING",
    })  # fmt: skip
    try:
        figures = _measure(args)
    finally:
        if args.writer == "postgres":
            from django.db import connections

            connections.close_all()
            drop_database(args.database_url, args.bench_db)
        _empty_claimed_redis(args.redis_url)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"\n{root} ({figures['commit']}), {args.writer}, {args.batches} batches of "
          f"{args.batch_size}, load average after: {load}")  # fmt: skip
    print("| phase | median ms | mean ms |")
    print("|---|---:|---:|")
    for name, (median, mean) in figures["phases"].items():
        print(f"| {name} | {median:.2f} | {mean:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(figures | {"load": load}, indent=2))


def _empty_claimed_redis(url: str) -> None:
    """Flush the Redis database only if scripts/own_services.py (our parent) claimed it for this
    run: it passes over a database that holds keys, so a run must not leave its fleet keys."""
    import redis

    parts = urlsplit(url)
    number = int(parts.path.strip("/") or 0)
    claims = redis.Redis.from_url(urlunsplit(parts._replace(path="/0")))
    owner = f"{os.uname().nodename}:{os.getppid()}".encode()
    if number and claims.get(f"breaker-panel:db-claim:{number}") == owner:
        redis.Redis.from_url(url).flushdb()


_CALLGRIND_C = r"""
#include <valgrind/callgrind.h>
void bp_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void bp_stop(void) { CALLGRIND_DUMP_STATS_AT("measured batches"); CALLGRIND_STOP_INSTRUMENTATION; }
void bp_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
"""


def _install_dumps(callgrind: Any) -> None:
    """Wrap each phase so that callgrind dumps its counts (and starts afresh) on the way in and
    out: each dump holds the instructions since the previous one, labelled ``A -> B``."""
    last = ["start"]

    def boundary(label: str) -> None:
        callgrind.bp_dump(f"{last[0]} -> {label}".encode())
        last[0] = label

    def wrap(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def dumped(*args: Any, **kwargs: Any) -> Any:
            boundary(f"in {name}")
            try:
                return func(*args, **kwargs)
            finally:
                boundary(f"out {name}")

        return dumped

    for module_name, attribute in PHASES + CALLGRIND_PHASES:
        target = _resolve(module_name, attribute)
        if target is None:
            continue
        owner, leaf = target
        original = getattr(owner, leaf)
        wrapped = wrap(attribute, original)
        setattr(owner, leaf, wrapped)
        if "." not in attribute:  # also where the app imported the function by name (runs.api)
            for other in list(sys.modules.values()):
                name = getattr(other, "__name__", "")
                if (
                    name.startswith(("runs.", "breakers."))
                    and getattr(other, leaf, None) is original
                ):
                    setattr(other, leaf, wrapped)


# Outer layers, for --callgrind-phases only (their segments show what lies between the phases).
CALLGRIND_PHASES = (
    ("django.test.client", "Client.post"),
    ("django.core.handlers.base", "BaseHandler._get_response"),
    ("controlplane.api", "AgentAuth.authenticate"),
    ("runs.auth", "AgentAuth.authenticate"),
    ("runs.services", "ingest_batch"),
)


def _callgrind_controls() -> Any:
    """Callgrind's client requests (valgrind/callgrind.h) as two C functions, through ctypes: they
    are no-ops outside valgrind."""
    import ctypes
    import subprocess

    folder = Path(tempfile.mkdtemp(prefix="bp-callgrind-"))
    source, library = folder / "toggle.c", folder / "toggle.so"
    source.write_text(_CALLGRIND_C)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return ctypes.CDLL(str(library))


def _measure(args: argparse.Namespace) -> dict[str, Any]:
    import subprocess

    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    out = io.StringIO()
    call_command("create_agent_token", "profile", stdout=out)
    token = out.getvalue().strip().splitlines()[-1]
    spent: dict[str, list[float]] = defaultdict(list)
    callgrind = _callgrind_controls() if args.callgrind else None
    if callgrind is None:
        _install_timers(spent)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    bodies = batches("profile-worker", f"p{secrets.token_hex(3)}", args.batch_size)

    def post(body: bytes) -> None:
        reply = client.post("/api/v1/events", body, content_type="application/json")
        assert reply.status_code == 200, reply.content[:300]
        body = reply.json()
        assert body["accepted"] == args.batch_size and not body["rejected"], body

    for _ in range(args.warmup):
        post(next(bodies))
    spent.clear()
    profiler = cProfile.Profile(time.thread_time) if args.profile else None
    bodies_to_send = [next(bodies) for _ in range(args.batches)] if callgrind else None
    if callgrind is not None and bodies_to_send is not None:
        # Start-up's objects (Django, the apps) are frozen out of the cyclic collector, so that
        # whether a full collection of them falls inside the measured batches does not swing
        # the count by ~2 batches' worth; the collections of what the batches allocate stay.
        if args.callgrind_phases:
            _install_dumps(callgrind)
        gc.collect()
        gc.freeze()
        before = [stats["collections"] for stats in gc.get_stats()]
        callgrind.bp_start()
        for body in bodies_to_send:
            post(body)
        callgrind.bp_stop()
        after = [stats["collections"] for stats in gc.get_stats()]
        print("gc collections in the measured batches (generations 0, 1, 2):",
              *(b - a for a, b in zip(before, after, strict=True)))  # fmt: skip
    for _ in range(0 if callgrind else args.batches):
        body = next(bodies)
        started = time.thread_time()
        if profiler is not None:
            profiler.enable()
        post(body)
        if profiler is not None:
            profiler.disable()
        spent["request (all)"].append(time.thread_time() - started)
    if profiler is not None:
        profiler.dump_stats(args.profile)
        stream = io.StringIO()
        stats = pstats.Stats(profiler, stream=stream).sort_stats("tottime")
        stats.print_stats(args.top)
        print(stream.getvalue())
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    phases = {
        name: (statistics.median(values) * 1000, statistics.fmean(values) * 1000)
        for name, values in spent.items()
    }
    return {"commit": commit, "writer": args.writer, "batches": args.batches, "phases": phases}


if __name__ == "__main__":
    main()
