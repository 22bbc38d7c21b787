"""The background sender when the control plane refuses a batch or answers nonsense.

A refusal that resending cannot fix (a 4xx other than 401/408/429, a 413 on a single event) is
dropped and counted, so it never holds up the events after it; "later" answers (no answer,
401, 408, 429, 5xx overload) are retried with the same ids. A 200 whose body makes no sense
still acknowledges the batch, and an unexpected exception in a round is logged and survived.
Real threads against a small scripted HTTP server on a free local port; waits poll deadlines.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from breaker_panel import ControlPlane, PlaneConfig
from scripts.testing.events_server import ScriptedServer, accepted
from tests.waiting import wait_for


def new_plane(url: str, *, start: bool = True, **settings: Any) -> ControlPlane:
    # A long backoff: a batch that were retried would keep close() from finishing in time.
    defaults: dict[str, Any] = {"flush_interval": 0.01, "backoff_base": 10.0, "timeout": 2.0}
    config = PlaneConfig(**{**defaults, **settings})
    return ControlPlane(url, token="bp_test", worker_id="w1", config=config, start=start)


def event_ids(plane: ControlPlane) -> list[str]:
    return [event["id"] for event in plane.buffered()]


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 403, 404, 405, 413, 422])
def test_a_refused_batch_is_dropped_counted_and_later_events_still_go(
    serve: Callable[..., ScriptedServer], status: int, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(lambda events, nth: (status, {"detail": "no"}) if nth == 1 else accepted(events))
    # One event a batch (a 413 on it is then final).
    plane = new_plane(server.url, batch_size=1, max_batch_size=1, start=False)
    run = plane.start_run(agent="research")
    refused = event_ids(plane)
    plane.start()
    with caplog.at_level(logging.ERROR, logger="breaker_panel.client"):
        wait_for(lambda: plane.stats.dropped == 1)
        run.record_success("web_search")
        run.finish()
        started = time.monotonic()
        assert plane.close(timeout=3)
    assert time.monotonic() - started < 3
    assert server.ids_received().count(refused[0]) == 1  # never resent
    # (A batch of no events may carry the drop report alone, if it was due before the call.)
    later = [batch[0]["type"] for batch in server.batches[1:] if batch]
    assert later == ["tool.call", "run.finished"]
    stats = plane.stats
    assert (stats.dropped, stats.refused_batches, stats.accepted) == (1, 1, 2)
    assert stats.dropped_reported == 1  # the next batch told the control plane
    assert caplog.text.count(f"with HTTP {status}; dropping it") == 1


def test_a_413_on_several_events_splits_the_batch_and_loses_none(
    serve: Callable[..., ScriptedServer],
) -> None:
    server = serve(lambda events, nth: (413, {}) if len(events) > 2 else accepted(events))
    plane = new_plane(server.url, start=False)
    run = plane.start_run(agent="research")
    for _ in range(6):
        run.record_success("web_search")
    run.finish()
    sent = event_ids(plane)
    plane.start()
    assert plane.close(timeout=3)
    assert sorted(set(server.ids_received())) == sorted(sent)
    assert [len(batch) for batch in server.batches][:3] == [8, 4, 2]
    assert (plane.stats.accepted, plane.stats.dropped) == (len(sent), 0)


@pytest.mark.parametrize("status", [401, 408, 429, 500, 503])
def test_a_later_answer_is_retried_with_the_same_ids(
    serve: Callable[..., ScriptedServer], status: int
) -> None:
    server = serve(lambda events, nth: (status, {}) if nth == 1 else accepted(events))
    plane = new_plane(server.url, backoff_base=0.01, start=False)
    plane.start_run(agent="research")
    sent = event_ids(plane)
    plane.start()
    assert plane.close(timeout=3)
    assert [[e["id"] for e in batch] for batch in server.batches] == [sent, sent]
    assert (plane.stats.failed_attempts, plane.stats.dropped) == (1, 0)


# -- replies that make no sense, and exceptions nobody expected ---------------------------------


@pytest.mark.parametrize(
    "body", [{"accepted": None}, {"accepted": "2", "rejected": {}}, b"OK", b"", [1, 2]]
)
def test_a_malformed_200_counts_as_acknowledged_and_sending_goes_on(
    serve: Callable[..., ScriptedServer], body: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(lambda events, nth: (200, body) if nth == 1 else accepted(events))
    plane = new_plane(server.url, start=False)
    run = plane.start_run(agent="research")
    plane.start()
    with caplog.at_level(logging.WARNING, logger="breaker_panel.client"):
        assert plane.flush(timeout=3)
        run.record_success("web_search")
        assert plane.close(timeout=3)
    assert len(server.batches) == 2  # not resent, and the later batch went out
    assert server.batches[1][0]["type"] == "tool.call"
    assert (plane.stats.malformed_replies, plane.stats.sent_batches) == (1, 2)
    assert (plane.stats.accepted, plane.stats.dropped) == (1, 0)
    assert "malformed reply" in caplog.text


class FlakyPlane(ControlPlane):
    """Raises where nothing should, once per method: the threads must log it and carry on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.raised: set[str] = set()
        super().__init__(*args, start=False, **kwargs)
        acknowledge = self.sender._acknowledge

        def flaky_acknowledge(reply: Any) -> None:
            self._once("acknowledge")
            acknowledge(reply)

        self.sender._acknowledge = flaky_acknowledge  # type: ignore[method-assign]
        self.start()

    def _once(self, where: str) -> None:
        if where not in self.raised:
            self.raised.add(where)
            raise RuntimeError(f"bug in {where}")

    def _ask_for_trials(self) -> None:
        self._once("ask for trials")
        super()._ask_for_trials()


def test_an_unexpected_exception_is_logged_and_both_threads_carry_on(
    serve: Callable[..., ScriptedServer], caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(lambda events, nth: accepted(events))
    with caplog.at_level(logging.ERROR, logger="breaker_panel.client"):
        plane = FlakyPlane(
            server.url,
            token="bp_test",
            worker_id="w1",
            config=PlaneConfig(
                flush_interval=0.01, fleet_poll_interval=0.01, backoff_base=0.01, timeout=2.0
            ),
        )
        run = plane.start_run(agent="research")
        wait_for(lambda: plane.stats.loop_errors == 2 and plane.stats.fleet_polls >= 3)
        run.record_success("web_search")
        assert plane.close(timeout=3)
    assert all(thread.is_alive() is False for thread in plane.threads())
    # The drop report goes with the next batch, or alone (an empty batch) if the sender gets there
    # before the run records its call: which one depends on the machine's load.
    sent = [batch[0]["type"] for batch in server.batches if batch]
    assert sent == ["run.started", "tool.call"]
    assert plane.stats.dropped == 1  # the batch in flight when it broke: counted, not resent
    assert plane.stats.dropped_reported == 1
    assert "bug in acknowledge" in caplog.text and "bug in ask for trials" in caplog.text
    assert "Traceback" in caplog.text
