"""The outage ledger's spend-avoided estimate against the replay, where the truth is known: the
same scenario played with mode ``none`` (nothing hides the tool) and with a breaker mode. Each
run of one replay starts when the same run of the other does, so the truth for the runs the
ledger counts is what those runs spent under ``none`` less what they spent under the breaker.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from pytest_django.fixtures import Settings
from pytest_django.live_server_helper import LiveServer

from breakers.alerts.ledger import incident_ledger, streak_start
from breakers.models import Incident
from breakers.replay.outage import Scenario, play_outage, server_settings
from runs.incident_runs import runs_affected
from runs.models import OutageReplay, Run

pytestmark = pytest.mark.django_db(transaction=True)

SMALL = Scenario(
    runs_in_window=40,
    baseline_s=60,
    baseline_runs=6,
    tail_s=600,
    tail_runs=30,
    workers=4,
)
SPEED = 150.0


def _runs_in_start_order(replay: OutageReplay) -> list[Run]:
    runs = Run.objects.filter(worker__worker_id__startswith=replay.worker_prefix)
    return list(runs.order_by("started_at", "pk"))


@pytest.mark.parametrize("mode", ["fleet", "run"])
def test_the_spend_avoided_estimate_is_within_20_percent_of_the_replayed_truth(
    live_server: LiveServer, ticking: None, settings: Settings, mode: str
) -> None:
    # The control plane keeps time with the replay as the demo's does (``make demo``).
    for name, value in server_settings(speed=SPEED).items():
        setattr(settings, name, float(value))
    play_outage(modes=["none", mode], scenario=SMALL, speed=SPEED, url=live_server.url)
    none = OutageReplay.objects.get(mode="none")
    breaker = OutageReplay.objects.get(mode=mode)
    incident = (
        Incident.objects.filter(tool__name="web_search", opened_at__gte=breaker.started_at)
        .order_by("opened_at")
        .first()
    )
    assert incident is not None, "the breaker mode's outage opened no incident"
    end = min(incident.closed_at or breaker.finished_at, breaker.finished_at)
    ledger = incident_ledger(incident=incident, end=end, baseline_start=breaker.started_at)

    # The truth, run by run: what the runs the ledger counts spent under ``none``, less what
    # they spent here.
    with_breaker = _runs_in_start_order(breaker)
    without = _runs_in_start_order(none)
    assert len(with_breaker) == len(without) == len(SMALL.run_starts())
    rank = {run.pk: i for i, run in enumerate(with_breaker)}
    counted = runs_affected(tool="web_search", start=streak_start(incident), end=end)
    counted = counted.filter(duration_ms__isnull=False)
    truth = sum(
        (without[rank[run.pk]].model_spend_usd - run.model_spend_usd for run in counted),
        Decimal(0),
    )

    assert ledger.estimated and ledger.avoided_usd is not None
    assert truth > 0
    assert ledger.avoided_usd == pytest.approx(float(truth), rel=0.20), ledger.method_text
    assert ledger.avoided_low_usd is not None and ledger.avoided_high_usd is not None
    assert ledger.avoided_low_usd <= ledger.avoided_usd <= ledger.avoided_high_usd
    # The other lines of the ledger, as the replay played them.
    assert ledger.discovery_runs > 0 and ledger.discovery_spend_usd > 0
    if mode == "fleet":
        assert ledger.hidden_runs > ledger.discovery_runs  # the fleet hid it from most runs
        spend_per_hidden = ledger.spend_per_hidden_run_usd
        assert spend_per_hidden is not None
        assert spend_per_hidden < Decimal(str(ledger.failing_run.usd)) / 2
    print(
        f"\nLEDGER {mode}: estimate {ledger.avoided_usd:.2f} truth {truth:.2f}, "
        f"{ledger.uncertain_runs} of {ledger.hidden_runs} hidden runs after the last failure"
    )
