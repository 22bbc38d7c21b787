"""The background sender when the control plane fails: it never jams, and loses only what the
server cannot take.

"Later" answers (503, 429, anything with Retry-After, no answer) are resent until they go
through, however many times. A batch the server keeps failing with another 5xx is bisected down
to the event it cannot take; only that event is dropped, once an empty batch shows the server is
up. ``flush()`` and ``close()`` keep to their timeout whatever the server does. Real threads
against a small scripted HTTP server on a free local port; outages are counted in requests, not
seconds, so nothing depends on how fast the machine is.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from breakers.sdk import ControlPlane, ToolFailure
from tests.waiting import wait_for

Events = list[dict[str, Any]]
# status, JSON body, extra headers
Answer = tuple[int, Any, dict[str, str]]
FLEET = {"version": 1, "tools": {}}
TRANSITION_BUG = {"detail": "Internal Server Error: KeyError: 'run-1'"}


def accepted(events: Events) -> Answer:
    return 200, {"accepted": len(events), "duplicates": 0, "rejected": [], "fleet": FLEET}, {}


class ScriptedServer:
    """``POST /api/v1/events`` answers ``script(events, nth request)``; keeps every batch and
    which ones it answered 200."""

    def __init__(self, script: Callable[[Events, int], Answer]) -> None:
        self.script = script
        self.fail_drop_reports = False  # answer 500 to any body carrying a drop report
        self.batches: list[Events] = []
        self.taken: list[Events] = []  # the batches answered 200
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._answer(200, FLEET, {})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.batches.append(body["events"])
                    nth = len(server.batches)
                status, reply, headers = server.script(body["events"], nth)
                if server.fail_drop_reports and "dropped" in body:
                    status, reply, headers = 500, {"detail": "bug in the drop report"}, {}
                if status == 200:
                    with server.lock:
                        server.taken.append(body["events"])
                self._answer(status, reply, headers)

            def _answer(self, status: int, body: Any, headers: dict[str, str]) -> None:
                raw = json.dumps(body).encode()
                try:
                    self.send_response_only(status)
                    for name, value in {"Content-Type": "application/json", **headers}.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:
                    pass  # the client gave up waiting (a test of timeouts)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def taken_ids(self) -> list[str]:
        with self.lock:
            return [event["id"] for batch in self.taken for event in batch]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[Events, int], Answer]], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(script: Callable[[Events, int], Answer]) -> ScriptedServer:
        servers.append(ScriptedServer(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def new_plane(url: str, **options: Any) -> ControlPlane:
    defaults: dict[str, Any] = {
        "flush_interval": 0.01, "fleet_poll_interval": 60.0, "backoff_base": 0.01,
        "backoff_max": 0.02, "timeout": 10.0,
    }  # fmt: skip
    return ControlPlane(url, token="bp_test", worker_id="w1", **{**defaults, **options})


def play_run(plane: ControlPlane, *, calls: int = 12) -> None:
    """A run that loses web_search (a run and a worker transition) among model and tool calls."""
    run = plane.start_run(agent="research")
    for _ in range(calls):
        run.record_model_call(input_tokens=10, output_tokens=5, cost_usd=0.001)
        run.record_failure("web_search", ToolFailure("503 from vendor"))
        run.record_success("read_page")
    run.finish()


def buffered(plane: ControlPlane) -> Events:
    return plane.buffered()


# -- a server error on one kind of event -----------------------------------------------------


def fails_on_transitions(events: Events, nth: int) -> Answer:
    if any(event["type"] == "breaker.transition" for event in events):
        return 500, TRANSITION_BUG, {}
    return accepted(events)


def test_a_server_that_500s_on_one_event_type_keeps_delivering_everything_else(
    serve: Callable[..., ScriptedServer], caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(fails_on_transitions)
    plane = new_plane(server.url, start=False)
    play_run(plane)
    sent = buffered(plane)
    bad = [event["id"] for event in sent if event["type"] == "breaker.transition"]
    assert len(bad) == 2 and len(sent) == 40  # one batch: the bad events are in it

    with caplog.at_level(logging.ERROR, logger="breakers.sdk.client"):
        plane.start()
        assert plane.flush(timeout=30)
        requests = len(server.batches)
        # The worker's next run is not held up either.
        play_run(plane, calls=6)
        later = buffered(plane)
        bad += [event["id"] for event in later if event["type"] == "breaker.transition"]
        assert plane.flush(timeout=30)
        wait_for(lambda: plane.stats.dropped_reported == plane.stats.dropped)
        assert plane.close(timeout=30) is True

    taken = server.taken_ids()
    good = [event["id"] for event in sent + later if event["id"] not in bad]
    assert len(taken) == len(set(taken))  # each event once
    assert set(taken) == set(good)
    stats = plane.stats
    assert len(bad) == 3  # the second run's own breaker opens too
    assert (stats.undeliverable, stats.dropped, stats.refused_batches) == (3, 3, 0)
    assert stats.dropped_reported == 3  # the control plane was told
    assert stats.accepted == len(good)
    # Isolating 2 bad events among 40 takes 3 tries of the batch, a request per split on the
    # way down and 3 tries and an empty batch per bad event: not a resend per event.
    assert requests <= 3 + 2 * 2 * 6 + 2 * 4
    # Logged once per dropped event, with its type, its id and the server's reply.
    dropped_lines = [r.getMessage() for r in caplog.records if "dropping it" in r.getMessage()]
    assert len(dropped_lines) == 3
    assert all("breaker.transition" in line and "KeyError" in line for line in dropped_lines)
    assert all(any(event_id in line for line in dropped_lines) for event_id in bad)


def test_a_drop_report_the_server_cannot_take_is_given_up_not_the_events_carrying_it(
    serve: Callable[..., ScriptedServer], caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(lambda events, nth: accepted(events))
    server.fail_drop_reports = True
    plane = new_plane(server.url, max_buffer=5, batch_size=5, start=False)
    play_run(plane, calls=2)  # 8 events into a buffer of 5: 3 dropped
    sent = [event["id"] for event in buffered(plane)]
    assert plane.stats.dropped == 3
    with caplog.at_level(logging.ERROR, logger="breakers.sdk.client"):
        plane.start()
        assert plane.flush(timeout=30)
        assert plane.close(timeout=5)

    assert sorted(server.taken_ids()) == sorted(sent)  # every event went, once
    stats = plane.stats
    assert (stats.dropped, stats.undeliverable, stats.dropped_reported) == (3, 0, 3)
    assert "giving up on reporting them" in caplog.text


@pytest.mark.parametrize("status", [500, 502, 504])
def test_a_single_5xx_is_retried_not_dropped(
    serve: Callable[..., ScriptedServer], status: int
) -> None:
    server = serve(lambda events, nth: (status, {}, {}) if nth <= 2 else accepted(events))
    plane = new_plane(server.url, start=False)
    plane.start_run(agent="research")
    sent = [event["id"] for event in buffered(plane)]
    plane.start()
    assert plane.close(timeout=30)
    assert server.taken_ids() == sent
    assert [[event["id"] for event in batch] for batch in server.batches] == [sent] * 3
    assert (plane.stats.failed_attempts, plane.stats.dropped) == (2, 0)


# -- a server that is down for a while -------------------------------------------------------

OUTAGES: dict[str, Answer] = {
    "503": (503, {"detail": "database unavailable"}, {}),
    "503 Retry-After": (503, {"detail": "database unavailable"}, {"Retry-After": "0"}),
    "429 Retry-After": (429, {"detail": "slow down"}, {"Retry-After": "0"}),
    # A proxy in front of a control plane that is down fails the empty batch too: nothing is
    # taken for a bad event, though the batch is split meanwhile.
    "502 from a proxy": (502, {"detail": "bad gateway"}, {}),
    "500 on everything": (500, {"detail": "Internal Server Error"}, {}),
}


@pytest.mark.parametrize("outage", OUTAGES)
def test_a_server_down_for_a_while_loses_nothing(
    serve: Callable[..., ScriptedServer], outage: str
) -> None:
    # "A while" is counted in requests, not seconds: at least 60 are refused, and the server
    # comes back only when the test says so.
    down_for, back = 60, threading.Event()

    def script(events: Events, nth: int) -> Answer:
        return OUTAGES[outage] if nth <= down_for or not back.is_set() else accepted(events)

    server = serve(script)
    plane = new_plane(server.url, batch_size=20)
    play_run(plane)  # 40 events: two batches
    # Runs go on during the outage: their events queue behind, and arrive too.
    wait_for(lambda: len(server.batches) >= down_for // 2)
    play_run(plane, calls=2)
    emitted = plane.pending()  # nothing was taken yet
    back.set()
    assert plane.flush(timeout=60)
    assert plane.close(timeout=5)

    taken = server.taken_ids()
    assert len(server.batches) > down_for
    assert len(taken) == len(set(taken)) == emitted >= 48
    assert (plane.stats.dropped, plane.stats.undeliverable) == (0, 0)
    assert plane.stats.accepted == emitted


# -- flush() and close() keep to their timeout ---------------------------------------------


@pytest.fixture
def hang() -> Iterator[threading.Event]:
    released = threading.Event()
    yield released
    released.set()


@pytest.mark.parametrize("behaviour", ["hangs", "500s", "503s"])
def test_flush_and_close_return_within_their_timeout_whatever_the_server_does(
    serve: Callable[..., ScriptedServer], hang: threading.Event, behaviour: str
) -> None:
    def script(events: Events, nth: int) -> Answer:
        if behaviour == "hangs":
            hang.wait(60)
            return accepted(events)
        return (500 if behaviour == "500s" else 503), {}, {}

    server = serve(script)
    # Requests may take 30 s before they time out: neither call may wait for one.
    plane = new_plane(server.url, timeout=30.0)
    play_run(plane, calls=2)
    emitted = plane.pending()

    started = time.monotonic()
    assert plane.flush(timeout=0.5) is False
    flushed_in = time.monotonic() - started
    started = time.monotonic()
    assert plane.close(timeout=0.5) is False
    closed_in = time.monotonic() - started

    # Generous margins, far below the 30 s a request may take.
    assert flushed_in < 5 and closed_in < 5
    assert plane.stats.accepted == plane.stats.dropped == 0  # nothing was given up on
    assert plane.pending() == emitted == 8


# -- why accepted can be 0 after a flush() that returned True --------------------------------


def test_an_attempt_whose_answer_is_lost_is_counted_as_duplicates_on_the_resend(
    serve: Callable[..., ScriptedServer], hang: threading.Event
) -> None:
    """The server applies the batch but answers after the client's timeout: the resend is
    answered "duplicates". flush() is right to return True (every event is in, once), and
    ``accepted`` stays 0: a test must count ``accepted + duplicates`` (or the rows)."""
    applied: set[str] = set()

    def script(events: Events, nth: int) -> Answer:
        ids = {event["id"] for event in events}
        new = ids - applied
        applied.update(ids)
        if nth == 1:
            hang.wait(60)  # released once the client has given up and resent
        else:
            hang.set()
        reply = {"accepted": len(new), "duplicates": len(ids) - len(new), "rejected": []}
        return 200, {**reply, "fleet": FLEET}, {}

    server = serve(script)
    plane = new_plane(server.url, timeout=0.3, start=False)
    play_run(plane, calls=1)
    sent = [event["id"] for event in buffered(plane)]
    plane.start()
    assert plane.flush(timeout=30)

    assert len(server.batches) >= 2 and applied == set(sent)
    stats = plane.stats
    assert (stats.accepted, stats.duplicates, stats.dropped) == (0, len(sent), 0)
    assert stats.failed_attempts >= 1
    plane.close(timeout=5)
