"""How the background sender cuts the buffer into batches: a backlog (events recorded while the
last batch was on the wire, or before the sender started) goes out in batches of up to
``max_batch_size``, not ``batch_size``. Real threads against a scripted local HTTP server.
"""

from __future__ import annotations

from collections.abc import Callable

from breaker_panel import ControlPlane, PlaneConfig
from scripts.testing.events_server import ScriptedServer, accepted


def backlog(url: str, *, calls: int, **settings: int) -> ControlPlane:
    """A plane whose sender starts with one run of ``calls`` tool calls (calls + 2 events)."""
    config = PlaneConfig(flush_interval=0.01, fleet_poll_interval=60, fleet_wait=0, **settings)
    plane = ControlPlane(url, token="bp_test", worker_id="w1", config=config, start=False)
    run = plane.start_run(agent="research")
    for _ in range(calls):
        run.record_success("web_search")
    run.finish()
    return plane


def test_a_backlog_goes_out_in_batches_of_up_to_max_batch_size(
    serve: Callable[..., ScriptedServer],
) -> None:
    server = serve(lambda events, nth: accepted(events))
    plane = backlog(server.url, calls=118, batch_size=10, max_batch_size=50)  # 120 events
    plane.start()
    assert plane.close(timeout=5)
    assert [len(batch) for batch in server.batches] == [50, 50, 20]
    assert plane.stats.accepted == 120


def test_max_batch_size_below_batch_size_means_batch_size(
    serve: Callable[..., ScriptedServer],
) -> None:
    server = serve(lambda events, nth: accepted(events))
    plane = backlog(server.url, calls=23, batch_size=10, max_batch_size=1)  # 25 events
    plane.start()
    assert plane.close(timeout=5)
    assert [len(batch) for batch in server.batches] == [10, 10, 5]
