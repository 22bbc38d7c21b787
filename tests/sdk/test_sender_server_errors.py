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

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from breaker_panel import ControlPlane, PlaneConfig
from scripts.testing.events_server import (
    FLEET,
    Answer,
    Events,
    ScriptedServer,
    accepted,
    fails_on_transitions,
    play_run,
)
from tests.waiting import wait_for


def new_plane(url: str, *, start: bool = True, **settings: Any) -> ControlPlane:
    defaults: dict[str, Any] = {
        "flush_interval": 0.01, "fleet_poll_interval": 60.0, "backoff_base": 0.01,
        "backoff_max": 0.02, "timeout": 10.0,
    }  # fmt: skip
    config = PlaneConfig(**{**defaults, **settings})
    return ControlPlane(url, token="bp_test", worker_id="w1", config=config, start=start)


# -- a server error on one kind of event -----------------------------------------------------


def test_a_server_that_500s_on_one_event_type_keeps_delivering_everything_else(
    serve: Callable[..., ScriptedServer], caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(fails_on_transitions)
    plane = new_plane(server.url, start=False)
    play_run(plane)
    sent = plane.buffered()
    bad = [event["id"] for event in sent if event["type"] == "breaker.transition"]
    assert len(bad) == 2 and len(sent) == 40  # one batch: the bad events are in it

    with caplog.at_level(logging.ERROR, logger="breaker_panel.client"):
        plane.start()
        assert plane.flush(timeout=30)
        requests = len(server.batches)
        # The worker's next run is not held up either.
        play_run(plane, calls=6)
        later = plane.buffered()
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
    sent = [event["id"] for event in plane.buffered()]
    assert plane.stats.dropped == 3
    with caplog.at_level(logging.ERROR, logger="breaker_panel.client"):
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
    sent = [event["id"] for event in plane.buffered()]
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
    sent = [event["id"] for event in plane.buffered()]
    plane.start()
    assert plane.flush(timeout=30)

    assert len(server.batches) >= 2 and applied == set(sent)
    stats = plane.stats
    assert (stats.accepted, stats.duplicates, stats.dropped) == (0, len(sent), 0)
    assert stats.failed_attempts >= 1
    plane.close(timeout=5)
