"""The outage replay end to end: the real SDK, the real HTTP ingest, the fleet breaker in Redis.

A small, fast version of the story (fewer runs, more compression) run in three modes. The
assertions are the product's claims, as ratios: failing fast saves time but not money; removing
the tool saves both, and the fleet breaker sends far fewer calls to the failing vendor.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from django.core.management import CommandError, call_command
from pytest_django.fixtures import Settings
from pytest_django.live_server_helper import LiveServer

from breakers.models import FleetTransition, Tool
from breakers.replay.outage import Scenario, play_outage
from runs.models import OutageReplay, Run, RunStatus

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # A hang guard, not a speed check: on a loaded machine the replay's clock waits for the
    # control plane to ingest (fail-fast mode most), and these plays ran past 120 s in CI.
    pytest.mark.timeout(300),
]

# The story's 22-minute window (so runs that start in it fail all the way through, as in the
# story) with fewer runs and workers, and a tail longer than the capped cooldown so the tool can
# come back after the vendor does.
SMALL = Scenario(
    runs_in_window=40,
    baseline_s=60,
    baseline_runs=6,
    tail_s=600,
    tail_runs=30,
    workers=4,
)
SPEED = 150.0


def test_removing_the_tool_saves_money_while_failing_fast_only_saves_time(
    live_server: LiveServer, ticking: None, settings: Settings
) -> None:
    # The control plane's clock is real: its trial lease shrinks with the replay, as in the demo.
    settings.BREAKER_TRIAL_LEASE_SECONDS = 120 / SPEED
    results = play_outage(
        modes=["none", "fail-fast", "fleet"], scenario=SMALL, speed=SPEED, url=live_server.url
    )
    summaries = [result.figures for result in results]
    by_mode = {s["mode"]: s for s in summaries}
    none, fail_fast, fleet = by_mode["none"], by_mode["fail-fast"], by_mode["fleet"]

    # Every run of every mode landed once, finished, through the real ingest: the story's, and
    # those the replay played on with until the tool recovered (none on a quiet machine; under
    # load a trial can miss the story's last runs).
    for replay in OutageReplay.objects.all():
        runs = Run.objects.filter(worker__worker_id__startswith=replay.worker_prefix)
        played_on = by_mode[replay.mode]["recovery_runs"]
        assert runs.count() == len(SMALL.run_starts()) + played_on
        assert not runs.filter(status=RunStatus.RUNNING).exists()
    assert all(s["events_dropped"] == 0 for s in summaries)

    # Fail-fast: much faster, but the bill does not move.
    assert fail_fast["mean_run_duration_s"] * 3 < none["mean_run_duration_s"]
    assert fail_fast["model_spend_usd"] == pytest.approx(none["model_spend_usd"], rel=0.05)
    # Removing the tool fleet-wide: cheaper, and far fewer calls at the failing vendor.
    assert fleet["model_spend_usd"] < 0.5 * none["model_spend_usd"]
    assert fleet["web_search_calls"] * 3 < none["web_search_calls"]
    assert fleet["degraded_runs"] > 0
    # After the vendor came back, one of the replay's runs took the half-open trial (the tool
    # has no probe), so the demo ends with the tool closed, its incident over.
    assert fleet["recovery_lag_s"] is not None
    assert Tool.objects.get(name="web_search").state == "closed"
    # The consecutive rule opened it (the spend rule is off unless the replay sets an amount).
    assert fleet["fleet_opened_by"] == "consecutive"
    assert fleet["fleet_opened_s"] > 0


def test_with_a_spend_amount_the_spend_rule_opens_the_tool_before_the_streak(
    live_server: LiveServer, ticking: None, settings: Settings
) -> None:
    settings.BREAKER_TRIAL_LEASE_SECONDS = 120 / SPEED
    # Two workers' first failures burn about $0.08 of model calls; five consecutive failures
    # take three or more runs.
    (fleet,) = play_outage(
        modes=["fleet"],
        scenario=replace(SMALL, spend_amount_usd=0.05),
        speed=SPEED,
        url=live_server.url,
    )
    assert fleet.figures["fleet_opened_by"] == "spend"
    assert fleet.figures["fleet_opened_s"] > 0
    opening = FleetTransition.objects.get(tool__name="web_search", cause_kind="spend")
    assert opening.reason.startswith("spend rule: $")
    # The replay puts the tool's policy back as it found it.
    assert Tool.objects.get(name="web_search").policy.spend_amount_usd is None


def test_the_command_says_clearly_when_no_control_plane_answers() -> None:
    with pytest.raises(
        CommandError, match=re.escape("no control plane answers at http://127.0.0.1:9")
    ):
        call_command("simulate_outage", "--url", "http://127.0.0.1:9", "--mode", "none")


def test_the_vendor_fails_as_the_scenario_says() -> None:
    failure, seconds = SMALL.vendor_failure()
    assert (failure.retryable, failure.attempts, seconds) == (True, 5, 31.0)
    failure, seconds = replace(SMALL, failure_outcome="semantic").vendor_failure()
    assert (failure.retryable, failure.attempts, seconds) == (False, 1, SMALL.healthy_search_s)
