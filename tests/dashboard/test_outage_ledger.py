"""The outage ledger of an incident: its lines from the runs, the spend-avoided estimate by each
method, and where it is shown (the incident page, the Outages page)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client

from breakers.alerts.ledger import incident_ledger
from breakers.models import Incident, Tool
from runs.models import Run
from tests.dashboard.factories import (
    HOSTILE_NAME,
    T0,
    make_incident,
    make_model_call,
    make_run,
    make_tool,
    make_tool_call,
    make_transition,
    make_worker,
)

pytestmark = pytest.mark.django_db


def _failing_run(name: str, *, at: timedelta, spend: str, tool: str = "web_search") -> Run:
    """A run that met the failure and kept the tool to its end (no breaker in its agent)."""
    run = make_run(name, started_at=T0 + at, model_spend_usd=Decimal(spend))
    make_tool_call(run, step=1, ts=T0 + at + timedelta(seconds=1), tool=tool, outcome="retryable")
    return run


def _hidden_run(name: str, *, at: timedelta, spend: str, tool: str = "web_search") -> Run:
    """A run that lost the tool at once (the fleet breaker) and wrapped up."""
    run = make_run(name, started_at=T0 + at, model_spend_usd=Decimal(spend), degraded=True)
    make_transition(worker=run.worker, run=run, tool=tool, scope="fleet", ts=T0 + at)
    return run


def _incident(tool: Tool, *, opened: timedelta, closed: timedelta | None) -> Incident:
    return make_incident(
        tool, opened_at=T0 + opened, closed_at=None if closed is None else T0 + closed
    )


def test_measured_method_subtracts_each_hidden_run_from_a_failing_runs_spend() -> None:
    tool = make_tool("web_search")
    for i in range(5):
        _failing_run(f"f-{i}", at=timedelta(seconds=i), spend="1.00")
    # The last failure seen is at T0+5 s; these runs were hidden before it could be doubted.
    make_tool_call(
        make_run("late-failure", started_at=T0, model_spend_usd=Decimal("1.00")),
        step=1,
        ts=T0 + timedelta(minutes=9),
        outcome="retryable",
    )  # fmt: skip
    for i in range(10):
        _hidden_run(f"h-{i}", at=timedelta(minutes=1, seconds=i), spend="0.10")
    incident = _incident(tool, opened=timedelta(0), closed=timedelta(minutes=10))

    ledger = incident_ledger(incident=incident)

    assert ledger.failing_run.method == "measured"
    assert ledger.failing_run.usd == pytest.approx(1.0)
    assert (ledger.hidden_runs, ledger.hidden_spend_usd) == (10, Decimal("1.000000"))
    assert ledger.spend_per_hidden_run_usd == Decimal("0.1")
    assert ledger.discovery_runs == 6 and ledger.discovery_duration_s == pytest.approx(360)
    assert ledger.uncertain_runs == 0
    # Ten runs at $0.10 instead of $1.00; the late-failure run kept the tool (no saving).
    assert ledger.avoided_usd == pytest.approx(9.0)
    assert ledger.avoided_low_usd == pytest.approx(9.0)
    assert "measured: the mean of the 6 runs" in ledger.method_text


def test_extrapolated_method_prices_each_step_up_to_the_step_budget() -> None:
    tool = make_tool("web_search")
    worker = make_worker("w-1")
    # Two runs met the failure, then lost the tool (their run breaker opened) after 4 steps.
    for i in range(2):
        run = make_run(f"d-{i}", worker=worker, model_spend_usd=Decimal("0.10"), step_budget=10)
        for step in range(1, 5):
            at = T0 + timedelta(seconds=10 * step)
            make_model_call(run, step=step, ts=at, cost_usd=Decimal(step) / 100)
            make_tool_call(run, step=step, ts=at, outcome="retryable")
        make_transition(worker=worker, run=run, ts=T0 + timedelta(seconds=45))
    incident = _incident(tool, opened=timedelta(0), closed=timedelta(minutes=5))

    ledger = incident_ledger(incident=incident)

    # Each step costs 0.01 x step: a run that keeps failing takes 10 steps, $0.55 in all.
    assert ledger.failing_run.method == "extrapolated"
    assert ledger.failing_run.usd == pytest.approx(0.55)
    assert ledger.failing_run.low == pytest.approx(0.10 + 6 * 0.04)  # held at step 4's cost
    assert ledger.avoided_usd == pytest.approx(2 * (0.55 - 0.10))
    assert "10 model calls (the runs' step budget)" in ledger.method_text


def test_runs_hidden_after_the_last_failure_count_with_the_odds_the_vendor_was_down() -> None:
    tool = make_tool("web_search")
    for i in range(5):
        _failing_run(f"f-{i}", at=timedelta(seconds=i), spend="1.00")
    # Healthy runs before the outage: $0.20 each.
    for i in range(3):
        run = make_run(f"ok-{i}", started_at=T0 - timedelta(minutes=5 - i),
                       model_spend_usd=Decimal("0.20"))  # fmt: skip
        make_tool_call(run, step=1, ts=run.started_at, outcome="success")
    # The last failure at T0+6 s, the first success (the closing trial) at T0+106 s.
    last = _failing_run("f-last", at=timedelta(seconds=5), spend="1.00")
    success = make_run("trial", started_at=T0 + timedelta(seconds=105))
    make_tool_call(success, step=1, ts=T0 + timedelta(seconds=106), outcome="success")
    # Hidden at a quarter and at three quarters of the way: odds 3/4 and 1/4 of a failing run.
    _hidden_run("h-early", at=timedelta(seconds=31), spend="0.10")
    _hidden_run("h-late", at=timedelta(seconds=81), spend="0.10")
    incident = _incident(tool, opened=timedelta(0), closed=timedelta(seconds=110))

    ledger = incident_ledger(incident=incident, baseline_start=T0 - timedelta(minutes=10))

    assert last.pk and ledger.uncertain_runs == 2
    assert ledger.healthy_run_usd == pytest.approx(0.20)
    # Odds of a failing run, down: 3/4 + 1/4 = 1 run's worth; up: 1 run's worth of a healthy one.
    assert ledger.avoided_usd == pytest.approx(1.0 + 0.20 - 0.20, abs=0.01)
    assert ledger.avoided_low_usd == pytest.approx(2 * 0.20 - 0.20)
    assert ledger.avoided_high_usd == pytest.approx(2 * 1.0 - 0.20)
    assert "with the odds that the vendor was still down" in ledger.method_text


def test_nothing_to_estimate_from_says_so_and_the_page_still_renders(
    viewer_client: Client,
) -> None:
    tool = make_tool("web_search")
    incident = _incident(tool, opened=timedelta(0), closed=None)
    ledger = incident_ledger(incident=incident)
    assert not ledger.estimated and ledger.avoided_usd is None
    assert "no estimate" in ledger.method_text
    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()
    assert 'id="outage-ledger"' in html and "no estimate" in html


def test_the_incident_page_shows_the_ledger_with_its_method(viewer_client: Client) -> None:
    tool = make_tool("web_search")
    for i in range(5):
        _failing_run(f"f-{i}", at=timedelta(seconds=i), spend="1.00")
    for i in range(4):
        _hidden_run(f"h-{i}", at=timedelta(seconds=6 + i), spend="0.25")
    make_tool_call(
        make_run("late", model_spend_usd=Decimal("1.00")),
        step=1,
        ts=T0 + timedelta(minutes=2),
        outcome="retryable",
    )
    incident = _incident(tool, opened=timedelta(0), closed=timedelta(minutes=3))

    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()

    assert "Outage ledger" in html
    assert "Runs that hit the failure" in html
    assert "$0.2500" in html  # spend per run while hidden
    assert "$3.00" in html  # 4 runs x ($1.00 - $0.25)
    assert "Method:" in html and "measured: the mean of the 6 runs" in html


def test_the_outages_page_sums_ledgers_per_tool_and_day_and_escapes_tool_names(
    viewer_client: Client,
) -> None:
    from django.utils import timezone

    now = timezone.now()
    tool = make_tool(HOSTILE_NAME)
    opened = now - timedelta(hours=1)
    for i in range(5):
        run = make_run(f"f-{i}", started_at=opened, model_spend_usd=Decimal("1.00"))
        make_tool_call(run, step=1, ts=opened + timedelta(seconds=i), tool=HOSTILE_NAME,
                       outcome="retryable")  # fmt: skip
    for i in range(2):
        run = make_run(f"h-{i}", started_at=opened + timedelta(minutes=1),
                       model_spend_usd=Decimal("0.50"))  # fmt: skip
        make_transition(worker=run.worker, run=run, tool=HOSTILE_NAME, scope="fleet",
                        ts=opened + timedelta(minutes=1))  # fmt: skip
    make_tool_call(make_run("late", started_at=opened, model_spend_usd=Decimal("1.00")), step=1,
                   ts=opened + timedelta(minutes=20), tool=HOSTILE_NAME,
                   outcome="retryable")  # fmt: skip
    make_incident(
        tool, opened_at=opened + timedelta(seconds=5), closed_at=opened + timedelta(minutes=30)
    )

    html = viewer_client.get("/outages/").content.decode()

    assert 'id="outage-ledgers"' in html
    assert "outage-ledgers-chart" in html
    assert HOSTILE_NAME not in html and "&lt;img src=x" in html
    assert "$1.00" in html  # 2 runs x ($1.00 - $0.50) avoided


def test_traced_runs_and_gateway_refusals_make_a_ledger_too() -> None:
    """OTLP runs report no step budget and never a removal (they kept the tool): they are the
    failing runs measured. Runs refused by the MCP gateway (blocked calls) lost the tool."""
    tool = make_tool("web_search")
    for i in range(5):
        _failing_run(f"otlp-{i}", at=timedelta(seconds=i), spend="0.80")
    Run.objects.filter(run_id__startswith="otlp-").update(source="otlp", step_budget=None)
    for i in range(3):
        run = make_run(f"mcp-{i}", started_at=T0 + timedelta(seconds=20),
                       model_spend_usd=Decimal("0.30"))  # fmt: skip
        make_tool_call(run, step=1, ts=T0 + timedelta(seconds=21), outcome="blocked", attempts=0)
    make_tool_call(make_run("late", model_spend_usd=Decimal("0.80")), step=1,
                   ts=T0 + timedelta(minutes=2), outcome="retryable")  # fmt: skip
    incident = _incident(tool, opened=timedelta(0), closed=timedelta(minutes=3))

    ledger = incident_ledger(incident=incident)

    assert ledger.failing_run.method == "measured"
    assert ledger.hidden_runs == 3
    assert ledger.avoided_usd == pytest.approx(3 * 0.50)


def test_the_slack_cards_recovered_figures_carry_the_ledger() -> None:
    from breakers.slack.cards import incident_card
    from breakers.transports.slack_cards import build_incident_card

    tool = make_tool("web_search")
    for i in range(5):
        _failing_run(f"f-{i}", at=timedelta(seconds=i), spend="1.00")
    for i in range(4):
        _hidden_run(f"h-{i}", at=timedelta(seconds=6 + i), spend="0.25")
    make_tool_call(make_run("late", model_spend_usd=Decimal("1.00")), step=1,
                   ts=T0 + timedelta(minutes=2), outcome="retryable")  # fmt: skip
    incident = _incident(tool, opened=timedelta(0), closed=timedelta(minutes=3))

    figures = dict(incident_card(incident).figures)

    assert figures["Runs while it was hidden"] == "4, $0.25 per run"
    assert figures["Spend avoided (estimate)"].startswith("$3.00 (range $3.00 to $3.00; measured")
    message = build_incident_card(incident_card(incident))  # within Slack's limits (checked)
    assert "Spend avoided (estimate): $3.00" in message.text
