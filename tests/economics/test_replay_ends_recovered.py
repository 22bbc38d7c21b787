"""The replay ends the way the README says: web_search closed and its incident resolved after
every mode, by its agents' own trial where they use the fleet breaker (the replay plays on,
bounded, until they have), or by a reset that says why; and a replay stopped half-played marks
itself interrupted. Against a live control plane, with a story whose tail is too short for the
tool to come back within it."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import redis
from pytest_django.fixtures import Settings
from pytest_django.live_server_helper import LiveServer

from breakers.management.commands.simulate_outage import stopped_as_interrupt
from breakers.models import Incident, Tool
from breakers.observability.health import BEAT_HEARTBEAT_KEY, write_beat_heartbeat
from breakers.replay.orchestration import tick_note
from breakers.replay.outage import (
    RunRecord,
    Scenario,
    play_outage,
    replay_interrupted,
    server_settings,
)
from runs.models import OutageReplay

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # A hang guard, not a speed check: on a loaded machine the replay's clock waits for the
    # control plane to ingest (fail-fast mode most), and these plays ran past 120 s in CI.
    pytest.mark.timeout(300),
]

# One run as the vendor comes back, and the story ends: the fleet's cooldown (30 s at least)
# has not run out by then, so only the runs played on after the story can take the trial.
SHORT_TAIL = Scenario(
    runs_in_window=24, baseline_s=60, baseline_runs=4, tail_s=6, tail_runs=1, workers=4
)
SPEED = 150.0


def _search_settled() -> None:
    assert Tool.objects.get(name="web_search").state == "closed"
    assert not Incident.objects.filter(tool__name="web_search", closed_at__isnull=True).exists()


def test_every_mode_ends_with_web_search_closed_and_its_incident_resolved(
    live_server: LiveServer, ticking: None, settings: Settings
) -> None:
    # The control plane keeps the replay's time, as make demo starts it.
    for name, value in server_settings(speed=SPEED).items():
        setattr(settings, name, float(value))
    none, fleet = play_outage(
        modes=["none", "fleet"], scenario=SHORT_TAIL, speed=SPEED, url=live_server.url
    )
    # Fleet mode: the replay played on after its one tail run until a run's trial call closed
    # the fleet breaker, so the recovery lag is a figure.
    assert fleet.figures["recovery_runs"] > 0
    assert fleet.figures["recovery_lag_s"] is not None
    assert fleet.figures["fleet_recovered"] is True
    _search_settled()
    # Mode none's agents never consult the fleet breaker, so whatever it did on their failures
    # was closed by the replay, which says why.
    assert none.figures["recovery_lag_s"] is not None
    if not none.figures["fleet_recovered"]:
        assert "do not use the fleet breaker" in none.figures["fleet_reset_reason"]


def test_a_replay_stopped_by_sigterm_marks_itself_interrupted(
    live_server: LiveServer, ticking: None, settings: Settings
) -> None:
    # The control plane keeps the replay's time, as make demo starts it.
    for name, value in server_settings(speed=SPEED).items():
        setattr(settings, name, float(value))
    once = threading.Lock()

    def stop(_mode: str, _record: RunRecord) -> None:
        if once.acquire(blocking=False):
            os.kill(os.getpid(), signal.SIGTERM)  # what make demo's Ctrl-C sends the replay

    with pytest.raises(SystemExit), stopped_as_interrupt():
        play_outage(
            modes=["none", "fleet"], scenario=SHORT_TAIL, speed=SPEED, url=live_server.url,
            on_run=stop,
        )  # fmt: skip
    # The runs that were playing go on for a moment on their own threads: let them end here.
    for thread in threading.enumerate():
        if thread.name.startswith("replay-"):
            thread.join(timeout=60)
    (replay,) = OutageReplay.objects.all()
    assert replay.finished_at is not None and replay_interrupted(replay)
    assert replay.summary["interrupted_by"] == "SystemExit"


def test_a_tool_no_trial_closed_says_when_the_fleet_tick_has_not_run(
    redis_client: redis.Redis,
) -> None:
    """The demo's Celery worker fell behind beat and every fleet tick expired unrun, so no tool
    went half-open: the reset's reason says so instead of blaming the agents."""
    assert "fleet tick, which makes an open tool half-open, has not run" in tick_note()
    redis_client.set(BEAT_HEARTBEAT_KEY, repr(time.time() - 600))
    assert "last ran 600 s ago" in tick_note()
    assert "Celery worker is stopped or behind beat" in tick_note()
    write_beat_heartbeat()
    assert tick_note() == ""
