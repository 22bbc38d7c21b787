"""``replay_ways`` records each invocation as it plays: a row per finished play, marked complete
only once every planned play was played, marked interrupted when anything stops it; the Outages
page never defaults to a half-played record. Real short plays against a live control plane."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from pytest_django.live_server_helper import LiveServer

from breakers.replay.scenario import Scenario
from breakers.replay.ways_records import play_and_record_ways, ways_status
from controlplane.dashboard.ways import ways_section
from runs.models import WaysReplay

pytestmark = pytest.mark.django_db(transaction=True)

# A short story (as tests/economics/test_simulate_outage.py's): a few runs, much compressed.
SMALL = Scenario(
    runs_in_window=10, baseline_s=60, baseline_runs=3, tail_s=120, tail_runs=3, workers=2
)
SPEED = 200.0


def test_a_stopped_play_leaves_its_finished_plays_and_is_never_the_default(
    live_server: LiveServer, ticking: None
) -> None:
    def stop_at_the_second(provider: str, mode: str, way: str | None) -> None:
        newest = WaysReplay.objects.order_by("-pk").first()
        if newest is not None and newest.rows:  # its first play was recorded: stop as Ctrl-C
            raise KeyboardInterrupt

    complete, _ = play_and_record_ways(
        scenario=SMALL, url=live_server.url, speed=SPEED, providers=["openai"], modes=["none"]
    )
    assert complete.complete and ways_status(complete) == "complete"
    WaysReplay.objects.filter(pk=complete.pk).update(started_at=complete.started_at.replace(
        year=complete.started_at.year - 1))  # fmt: skip
    complete.refresh_from_db()

    with pytest.raises(KeyboardInterrupt):
        play_and_record_ways(
            scenario=SMALL,
            url=live_server.url,
            speed=SPEED,
            providers=["openai", "anthropic"],
            modes=["none"],
            on_play=lambda p, m, w: (
                stop_at_the_second(p, m, w) if WaysReplay.objects.count() == 2 else None
            ),
        )
    partial = WaysReplay.objects.exclude(pk=complete.pk).get()
    assert partial.planned == [["openai", "none", None], ["anthropic", "none", None]]
    assert [row["provider"] for row in partial.rows] == ["openai"]
    assert partial.rows[0]["spend_usd"] > 0 and partial.assumptions
    assert not partial.complete and partial.interrupted_by == "KeyboardInterrupt"
    assert ways_status(partial) == "interrupted"
    # The newer record is half-played: the page shows the older complete one.
    assert ways_section().selected == complete
    assert ways_section(record_key=partial.pk).status == "interrupted"


def test_the_command_records_its_plays_and_still_writes_its_json(
    live_server: LiveServer, ticking: None, tmp_path: Path
) -> None:
    out = tmp_path / "ways.json"
    call_command(
        "replay_ways", "--url", live_server.url, "--provider", "anthropic", "--mode", "none",
        "--speed", "200", "--runs", "6", "--json", str(out),
    )  # fmt: skip
    record = WaysReplay.objects.get()
    assert record.complete and record.speed == 200.0 and len(record.rows) == 1
    figures = json.loads(out.read_text())
    assert figures["rows"] == record.rows and figures["assumptions"] == record.assumptions


def test_a_command_that_finds_no_control_plane_leaves_an_interrupted_record() -> None:
    with pytest.raises(
        CommandError, match=re.escape("no control plane answers at http://127.0.0.1:9")
    ):
        call_command("replay_ways", "--url", "http://127.0.0.1:9", "--mode", "none")
    record = WaysReplay.objects.get()
    assert record.rows == [] and not record.complete
    assert record.interrupted_by == "ReplayError" and ways_status(record) == "interrupted"
    assert ways_section().selected is None
