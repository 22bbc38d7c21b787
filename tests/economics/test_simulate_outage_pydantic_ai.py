"""``simulate_outage --agent pydantic-ai`` end to end: the command, the real SDK over HTTP to a
live control plane, the fleet breaker in Redis, Celery's tick, and every run played by a Pydantic
AI agent whose model is ``FunctionModel`` (offline; requests to real providers are forbidden).

The assertions are the hand-written replay's claims; the database agrees with the table, and
the incident page of the replayed outage with the database.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db.models import Q, Sum
from django.test import Client
from pytest_django.fixtures import Settings
from pytest_django.live_server_helper import LiveServer

from breakers.models import Incident
from breakers.replay.outage import Scenario
from controlplane.dashboard.incidents import incident_page
from runs.models import (
    ModelCall,
    OutageReplay,
    Outcome,
    ReportedTransition,
    Run,
    RunStatus,
    ToolCall,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_model_requests")]

SPEED = 150.0
RUNS, WORKERS, BASELINE_RUNS, TAIL_RUNS = 24, 4, 4, 6


def test_the_fleet_replay_through_pydantic_ai_removes_the_tool_and_the_database_agrees(
    live_server: LiveServer, ticking: None, settings: Settings, tmp_path: Path
) -> None:
    settings.BREAKER_TRIAL_LEASE_SECONDS = 120 / SPEED
    out = tmp_path / "replay.json"
    call_command(
        "simulate_outage",
        *("--url", live_server.url, "--agent", "pydantic-ai", "--mode", "fleet"),
        *("--speed", str(SPEED), "--runs", str(RUNS), "--workers", str(WORKERS)),
        *("--baseline-runs", str(BASELINE_RUNS), "--tail-runs", str(TAIL_RUNS)),
        *("--json", str(out)),
    )
    report = json.loads(out.read_text())
    (fleet,) = report["modes"]
    assert report["agent"] == fleet["agent"] == "pydantic-ai"
    assert fleet["agent_errors"] == 0 and fleet["events_dropped"] == 0

    replay = OutageReplay.objects.get()
    assert replay.scenario["agent"] == "pydantic-ai"
    runs = Run.objects.filter(worker__worker_id__startswith=replay.worker_prefix)
    # The story's runs, and those the replay played on with until web_search was closed.
    assert runs.count() == RUNS + BASELINE_RUNS + TAIL_RUNS + fleet["recovery_runs"]
    assert not runs.filter(status=RunStatus.RUNNING).exists()
    # Every web_search call the agents made reached the ledger once, with its HTTP attempts.
    searches = ToolCall.objects.filter(run__in=runs, tool="web_search")
    reached = searches.exclude(outcome=Outcome.BLOCKED)
    assert reached.count() == fleet["web_search_calls_total"]
    assert reached.aggregate(n=Sum("attempts"))["n"] == fleet["http_attempts"]
    # The model calls were priced by the integration from FunctionModel's usage, as the table.
    calls = ModelCall.objects.filter(run__in=runs)
    assert calls.filter(model="scripted-research-model").count() == calls.count()
    assert runs.aggregate(n=Sum("model_calls"))["n"] == calls.count()

    # The product's claim, through a framework's own tool plumbing: removing the tool saves
    # money. Mode none's runs each spend a full failing run (the scripted model's 20 steps).
    full_run = float(Scenario().run_cost(Scenario().step_budget))
    assert fleet["runs"] == RUNS
    assert fleet["model_spend_usd"] < 0.5 * RUNS * full_run
    assert fleet["runs_wrapped_up"] > RUNS // 2 and fleet["degraded_runs"] > RUNS // 2
    # The database's outage window (the replay's recorded wall times) holds the table's runs.
    window = runs.filter(
        started_at__gte=replay.outage_started_at, started_at__lt=replay.outage_ended_at
    )
    assert window.count() == fleet["runs"]
    assert window.aggregate(s=Sum("model_spend_usd"))["s"] == pytest.approx(
        Decimal(str(fleet["model_spend_usd"])), abs=Decimal("0.000001")
    )
    assert window.filter(degraded=True).count() == fleet["degraded_runs"]

    # The incident page of the replayed outage: its numbers are the database's, its "before"
    # is this replay's own time (not an earlier replay's), and it names the replay's table.
    incident = Incident.objects.get(tool__name="web_search")
    assert replay.started_at <= incident.opened_at <= replay.finished_at
    page = incident_page(incident=incident)
    during, before = page.comparison.during, page.comparison.before
    assert page.replay == replay and before.start >= replay.started_at
    in_window = {"tool": "web_search", "ts__gte": during.start, "ts__lt": during.end}
    called = ToolCall.objects.filter(**in_window).values("run_id")
    lost = ReportedTransition.objects.filter(**in_window, state="open").values("run_id")
    affected = Run.objects.filter(Q(pk__in=called) | Q(pk__in=lost))
    assert during.runs == affected.count() > 0
    in_incident = ToolCall.objects.filter(**in_window).exclude(outcome=Outcome.BLOCKED)
    assert during.vendor_calls == in_incident.count()
    spent = ModelCall.objects.filter(run__in=affected, ts__gte=during.start, ts__lt=during.end)
    assert during.model_spend_usd == spent.aggregate(s=Sum("cost_usd"))["s"]
    viewer = Client()
    viewer.force_login(User.objects.create_user("viewer", password="viewer-pass-123456"))
    html = viewer.get(f"/incidents/{incident.pk}/").content.decode()
    assert f'<dt>Runs affected</dt><dd class="num">{during.runs:,}</dd>' in html
    assert f'<dd class="num">{during.vendor_calls:,} <span' in html
    assert "mode <strong>fleet</strong>, pydantic-ai agent" in html
    assert f"counts the {fleet['runs']:,} runs started in its outage window" in html
    assert f"{fleet['web_search_calls']:,} calls at the failing vendor" in html
