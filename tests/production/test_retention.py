"""The retention purge deletes old ledger rows and calls in batches and keeps the rest."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from pytest_django.fixtures import Settings

from runs.models import IngestedEvent, ModelCall, Run, ToolCall, Worker
from runs.retention import purge_expired

pytestmark = pytest.mark.django_db


@pytest.fixture
def aged_rows(settings: Settings) -> Run:
    settings.RETENTION_CALLS_DAYS = 30
    settings.RETENTION_LEDGER_DAYS = 7
    now = timezone.now()
    worker = Worker.objects.create(worker_id="w-1")
    run = Run.objects.create(run_id="r-1", worker=worker, agent="a", started_at=now)
    for n, age in enumerate([40, 40, 40, 40, 40, 1, 1]):
        at = now - timedelta(days=age)
        ToolCall.objects.create(
            event_id=f"tc-{n}", run=run, worker=worker, ts=at, tool="t", outcome="success"
        )
        ModelCall.objects.create(event_id=f"mc-{n}", run=run, ts=at)
    for n, age in enumerate([10, 10, 10, 3]):
        IngestedEvent.objects.create(
            event_id=f"ev-{n}", worker=worker, received_at=now - timedelta(days=age)
        )
    return run


def test_purge_deletes_only_what_is_older_than_its_retention(aged_rows: Run) -> None:
    result = purge_expired(batch_size=2)
    assert result.finished
    assert result.deleted == {"runs.IngestedEvent": 3, "runs.ToolCall": 5, "runs.ModelCall": 5}
    assert ToolCall.objects.count() == 2 and ModelCall.objects.count() == 2
    assert list(IngestedEvent.objects.values_list("event_id", flat=True)) == ["ev-3"]
    assert Run.objects.filter(pk=aged_rows.pk).exists()  # runs and their totals stay


def test_purge_stops_after_max_batches_and_the_next_run_continues(aged_rows: Run) -> None:
    first = purge_expired(batch_size=2, max_batches=1)
    assert not first.finished
    assert first.deleted["runs.ToolCall"] == 2
    while not purge_expired(batch_size=2, max_batches=1).finished:
        pass
    assert ToolCall.objects.count() == 2


def test_slack_press_records_are_purged_after_their_retention(settings: Settings) -> None:
    from breakers.models import OperatorAction, SlackAction
    from breakers.slack.retention import purge_slack_actions
    from tests.dashboard.factories import make_incident, make_operator_action, make_tool

    settings.RETENTION_SLACK_ACTIONS_DAYS = 30
    now = timezone.now()
    tool = make_tool("web_search", state="open")
    incident = make_incident(tool, opened_at=now - timedelta(days=40))
    audit = make_operator_action(tool, at=now - timedelta(days=40), action="acknowledge")
    for n, age in enumerate([40, 40, 31, 29, 1]):
        SlackAction.objects.create(
            incident=incident, action="acknowledge", via=f"Slack (@u{n})",
            received_at=now - timedelta(days=age),
        )  # fmt: skip
    result = purge_slack_actions(now=now, batch_size=2)
    assert result.finished and result.deleted == {"breakers.SlackAction": 3}
    assert sorted(SlackAction.objects.values_list("via", flat=True)) == [
        "Slack (@u3)", "Slack (@u4)"
    ]  # fmt: skip
    assert OperatorAction.objects.filter(pk=audit.pk).exists(), "the audit log is kept"


def test_beat_runs_the_slack_press_purge_with_the_others() -> None:
    import breakers.tasks  # noqa: F401  (registers the task, as the worker's autodiscovery does)
    from controlplane.celery import app

    schedule = app.conf.beat_schedule
    assert schedule["purge-slack-actions"]["task"] == "breakers.purge_slack_actions"
    assert "breakers.purge_slack_actions" in app.tasks
