"""Benchmark: how long one bad event holds up a worker's other events, with the SDK's defaults.

Run from the repository root:

    .venv/bin/python bench/bench_sender.py [--rounds 3]

A local HTTP server (scripts/testing/events_server.py, as in the sender's tests) answers 500 to
any batch holding a ``breaker.transition`` event, as the SQLite writer of issue 10 did, and 200
to the rest. One run's 40 events (two of them transitions) go out as one batch with the default
backoff (0.5 s doubling) and ``server_error_tries`` (3). Reported per round: the seconds until
every other event was taken, the requests it took and the events dropped. Not a ratio: the time
is nearly all the client's own backoff waits, which do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from breaker_panel import ControlPlane, PlaneConfig
from scripts.testing.events_server import ScriptedServer, fails_on_transitions, play_run


def one_round() -> tuple[float, int, int]:
    server = ScriptedServer(fails_on_transitions)
    plane = ControlPlane(
        server.url,
        token="bp_bench",
        worker_id="w1",
        config=PlaneConfig(fleet_poll_interval=60),
        start=False,
    )
    try:
        play_run(plane)
        good = {e["id"] for e in plane.buffered() if e["type"] != "breaker.transition"}
        started = time.monotonic()
        plane.start()
        while not good <= set(server.taken_ids()):
            time.sleep(0.005)
        took = time.monotonic() - started
        plane.flush(timeout=30)
        return took, len(server.batches), plane.stats.dropped
    finally:
        plane.close(timeout=5)
        server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    logging.disable(logging.ERROR)  # the client logs each dropped event: expected here
    for n in range(1, rounds + 1):
        took, requests, dropped = one_round()
        print(f"round {n}: the 38 other events taken after {took:.2f} s, {requests} requests, "
              f"{dropped} events dropped")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
