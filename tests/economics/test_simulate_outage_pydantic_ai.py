"""``simulate_outage --agent pydantic-ai`` end to end: the command, the real SDK over HTTP to a
live control plane, the fleet breaker in Redis, Celery's tick, and every run played by a Pydantic
AI agent whose model is ``FunctionModel`` (offline; requests to real providers are forbidden).

The assertions are the hand-written replay's claims, and the database agrees with the table.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db.models import Sum
from pydantic_ai import models
from pytest_django.fixtures import Settings
from pytest_django.live_server_helper import LiveServer

from runs.models import ModelCall, OutageReplay, Outcome, Run, RunStatus, ToolCall
from runs.simulation.scenario import Scenario

pytestmark = pytest.mark.django_db(transaction=True)

SPEED = 150.0
RUNS, WORKERS, BASELINE_RUNS, TAIL_RUNS = 24, 4, 4, 6


@pytest.fixture(autouse=True)
def no_model_requests() -> Iterator[None]:
    allowed = models.ALLOW_MODEL_REQUESTS
    models.ALLOW_MODEL_REQUESTS = False
    yield
    models.ALLOW_MODEL_REQUESTS = allowed


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
    assert runs.count() == RUNS + BASELINE_RUNS + TAIL_RUNS
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
    # The ledger agrees the runs lost the tool (the board's and the pages' "tool removed").
    window = runs.filter(degraded=True)
    assert window.count() >= fleet["degraded_runs"]
    assert runs.aggregate(s=Sum("model_spend_usd"))["s"] > Decimal(0)
