"""A replay whose clock paused for a stalled control plane: the Outages page measures its runs on
the replay's clock, as the command's table does, not with the pause the runs' timestamps hold.

The stall is real: a transaction holds the dedupe ledger's table lock, so every batch the agents
send waits in PostgreSQL, and the replay's governor stops the clock until they are answered.
"""

from __future__ import annotations

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

from breakers.outage_replay import replay_token, simulate_modes
from controlplane.dashboard.economics import outage_comparison
from runs.economics import recent_replay_batches
from runs.models import IngestedEvent
from runs.simulation.scenario import Scenario

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


def test_the_outages_page_measures_a_paused_replay_on_its_own_clock(
    live_server: LiveServer, ticking: None, settings: Settings, client: Client
) -> None:
    settings.BREAKER_TRIAL_LEASE_SECONDS = 120 / SPEED
    with replay_token() as (token, raw), stalled_ingest_in("fail-fast") as on_mode:
        summaries = simulate_modes(
            modes=["none", "fail-fast"],
            scenario=STORY,
            speed=SPEED,
            url=live_server.url,
            token=token,
            raw_token=raw,
            on_mode=on_mode,
        )
    table = {s["mode"]: s for s in summaries}
    # The premise: the stalled ingest stopped fail-fast's clock for about as long as it lasted.
    assert table["fail-fast"]["paused_real_s"] >= STALL_S * 0.6
    assert table["none"]["paused_real_s"] == 0

    (batch,) = recent_replay_batches()
    modes = {m.replay.mode: m for m in outage_comparison(batch=batch).modes}
    for mode, summary in table.items():
        page = modes[mode].stats["outage"]
        assert page.runs == summary["runs"]
        assert page.mean_duration_s == pytest.approx(summary["mean_run_duration_s"], rel=0.03)
    speedup = table["none"]["mean_run_duration_s"] / table["fail-fast"]["mean_run_duration_s"]
    headline = modes["fail-fast"].headline
    assert headline.speedup == pytest.approx(speedup, rel=0.05)

    client.force_login(User.objects.create_user("v", password="v-pass-123456"))
    page = client.get("/outages/").content.decode()
    assert headline.text in page
    assert "include those pauses" not in page
