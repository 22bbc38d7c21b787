"""A replay whose clock paused for a stalled control plane: the Outages page and the incident page
measure its runs on the replay's clock, as the command's table does, not with the pause the runs'
timestamps hold.

The stall is real: a transaction holds the dedupe ledger's table lock, so every batch the agents
send waits in PostgreSQL, and the replay's governor stops the clock until they are answered.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import Client
from pytest_django.fixtures import Settings
from pytest_django.live_server_helper import LiveServer

from breakers.models import Incident
from breakers.replay.outage import (
    SEARCH,
    RunRecord,
    Scenario,
    play_outage,
    recent_replay_batches,
)
from controlplane.dashboard.economics import incident_charts, outage_comparison
from controlplane.dashboard.incidents import incident_page, measured_windows
from runs.models import IngestedEvent, OutageReplay, Run
from runs.outage_economics import runs_reaching_for

pytestmark = pytest.mark.django_db(transaction=True)

SPEED = 150.0
STORY = Scenario(runs_in_window=24, baseline_s=60, baseline_runs=4, tail_s=60, tail_runs=4)
STALL_AFTER_S, STALL_S = 2.0, 2.5  # real seconds into fail-fast mode; how long the ingest waits


@contextmanager
def stalled_ingest_in(mode: str) -> Iterator[Callable[[str], None]]:
    """Hold the ledger's table lock for ``STALL_S`` once ``mode`` has played ``STALL_AFTER_S``;
    yields the ``on_mode`` callback that starts the stall."""
    threads: list[threading.Thread] = []

    def stall() -> None:
        time.sleep(STALL_AFTER_S)
        with transaction.atomic():
            table = IngestedEvent._meta.db_table
            connection.cursor().execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
            time.sleep(STALL_S)
        connection.close()

    def on_mode(name: str) -> None:
        if name == mode:
            threads.append(threading.Thread(target=stall, daemon=True))
            threads[-1].start()

    yield on_mode
    for thread in threads:
        thread.join(timeout=30)


def test_the_pages_measure_a_paused_replay_on_its_own_clock(
    live_server: LiveServer, ticking: None, settings: Settings, client: Client
) -> None:
    settings.BREAKER_TRIAL_LEASE_SECONDS = 120 / SPEED
    records: list[RunRecord] = []  # fail-fast's runs as the command measured them

    def on_run(mode: str, record: RunRecord) -> None:
        if mode == "fail-fast":
            records.append(record)

    with stalled_ingest_in("fail-fast") as on_mode:
        results = play_outage(
            modes=["none", "fail-fast"],
            scenario=STORY,
            speed=SPEED,
            url=live_server.url,
            on_mode=on_mode,
            on_run=on_run,
        )
    summaries = [result.figures for result in results]
    table = {s["mode"]: s for s in summaries}
    # The premise: the stalled ingest stopped fail-fast's clock for about as long as it lasted.
    assert table["fail-fast"]["paused_real_s"] >= STALL_S * 0.6
    # Mode none has no fleet scope: the governor never stopped its clock (it may still have
    # held for its own runs, which the pages take out the same way).
    assert table["none"]["pauses"] == 0

    (batch,) = recent_replay_batches()
    modes = {m.replay.mode: m for m in outage_comparison(batch=batch).modes}
    for mode, summary in table.items():
        figures = modes[mode].stats["outage"]
        assert figures.runs == summary["runs"]
        assert figures.mean_duration_s == pytest.approx(summary["mean_run_duration_s"], rel=0.03)
    speedup = table["none"]["mean_run_duration_s"] / table["fail-fast"]["mean_run_duration_s"]
    headline = modes["fail-fast"].headline
    assert headline.speedup == pytest.approx(speedup, rel=0.05)

    client.force_login(User.objects.create_user("v", password="v-pass-123456"))
    html = client.get("/outages/").content.decode()
    assert headline.text in html
    assert "Every duration on this page is on the replay's own clock" in html

    # The incident the fleet breaker opened in fail-fast mode: its charts give real seconds, and
    # for the replay's runs those are the replay's (the story's / speed), not the timestamps'.
    replay = OutageReplay.objects.get(mode="fail-fast")
    incident = (
        Incident.objects.filter(opened_at__gte=replay.started_at, opened_at__lt=replay.finished_at)
        .order_by("opened_at")
        .first()
    )
    assert incident is not None
    incident_view = incident_page(incident=incident)
    charts = incident_charts(incident=incident, now=incident_view.end, window=incident_view.window)
    start, opened, end = measured_windows(
        incident=incident, end=incident.closed_at or incident_view.end, window=incident_view.window
    )
    during = set(
        runs_reaching_for(tool_name=SEARCH, start=start, end=end)
        .filter(duration_ms__isnull=False)
        .exclude(finished_at__lt=opened)
        .values_list("pk", flat=True)
    )
    # The database's runs and the command's records in the same order: by start.
    mine = Run.objects.filter(worker__worker_id__startswith=replay.worker_prefix)
    in_order = list(mine.order_by("started_at").values_list("pk", flat=True))
    assert len(in_order) == len(records)
    by_start = sorted(records, key=lambda record: record.started_s)
    told = [r.duration_s for pk, r in zip(in_order, by_start, strict=True) if pk in during]
    assert charts.during.runs == len(told) > 0
    assert charts.during.mean_duration_s == pytest.approx(statistics.fmean(told) / SPEED, rel=0.03)
