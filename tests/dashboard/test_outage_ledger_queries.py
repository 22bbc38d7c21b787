"""The Outages page reads every incident's outage ledger in a bounded number of queries: the
count does not grow with the incidents, and each ledger read together with others is the one it
has alone."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from breakers.alerts.ledger import incident_ledger, incident_ledgers
from breakers.models import Incident
from controlplane.dashboard.ledgers import ledger_summary
from tests.dashboard.factories import (
    make_incident,
    make_model_call,
    make_probe,
    make_run,
    make_tool,
    make_tool_call,
    make_transition,
)

pytestmark = pytest.mark.django_db


def _incidents(count: int, *, first: int = 0) -> list[Incident]:
    """``count`` incidents of their own tools, every estimator path among them: measured
    (five failing runs kept the tool), extrapolated (two, with model calls by step), a streak
    named by its events, a failed probe, hidden runs after the last failure."""
    now = timezone.now()
    made = []
    for k in range(first, first + count):
        name = f"tool-{k}"
        tool = make_tool(name)
        opened = now - timedelta(hours=k + 1)
        failing = 5 if k % 2 == 0 else 2
        events = []
        for i in range(failing):
            run = make_run(f"{name}-f-{i}", started_at=opened - timedelta(seconds=30),
                           model_spend_usd=Decimal("1.00") + Decimal(k) / 10)  # fmt: skip
            call = make_tool_call(run, step=1, ts=opened - timedelta(seconds=20 - i), tool=name,
                                  outcome="retryable")  # fmt: skip
            events.append(call.event_id)
            for step in (1, 2, 3):
                make_model_call(run, step=step, ts=opened - timedelta(seconds=25 - step),
                                cost_usd=Decimal("0.01") * step)  # fmt: skip
        for i in range(3):
            run = make_run(f"{name}-h-{i}", started_at=opened + timedelta(minutes=i),
                           model_spend_usd=Decimal("0.25"), degraded=True)  # fmt: skip
            make_transition(worker=run.worker, run=run, tool=name, scope="fleet",
                            ts=opened + timedelta(minutes=i))  # fmt: skip
        healthy = make_run(f"{name}-ok", started_at=opened - timedelta(minutes=20),
                           model_spend_usd=Decimal("0.40"))  # fmt: skip
        make_tool_call(healthy, step=1, ts=opened - timedelta(minutes=20), tool=name)
        make_probe(tool, at=opened + timedelta(minutes=1), ok=False)
        closed = None if k == 0 else opened + timedelta(minutes=10)
        made.append(
            make_incident(
                tool, opened_at=opened, closed_at=closed, cause={"events": events, "workers": ["w"]}
            )
        )
    return made


def _queries(call: object) -> int:
    with CaptureQueriesContext(connection) as context:
        call()  # type: ignore[operator]
    return len(context.captured_queries)


def test_the_ledger_summary_s_queries_do_not_grow_with_the_incidents() -> None:
    _incidents(2)
    with_two = _queries(ledger_summary)
    _incidents(6, first=2)
    assert Incident.objects.count() == 8
    assert _queries(ledger_summary) == with_two
    assert with_two <= 15


def test_the_outages_page_s_queries_do_not_grow_with_the_incidents(viewer_client: Client) -> None:
    _incidents(2)
    with_two = _queries(lambda: viewer_client.get("/outages/"))
    _incidents(6, first=2)
    with_more = _queries(lambda: viewer_client.get("/outages/"))
    assert with_more == with_two


def test_each_ledger_read_with_others_is_the_one_it_has_alone() -> None:
    incidents = list(
        Incident.objects.filter(pk__in=[i.pk for i in _incidents(4)])
        .select_related("tool", "opened_by")
        .order_by("pk")
    )
    together = incident_ledgers(incidents)
    alone = [incident_ledger(incident=incident) for incident in incidents]
    # The open incident's ledger ends "now", which moves between the two reads.
    for mine, single in zip(together[1:], alone[1:], strict=True):
        assert mine == single
    assert {ledger.failing_run.method for ledger in together} == {"measured", "extrapolated"}
    assert all(ledger.hidden_runs == 3 and ledger.estimated for ledger in together)


def test_failures_are_seen_until_the_last_failed_probe_of_each_incident_s_own_window() -> None:
    first, second = _incidents(2)  # opened 1 h and 2 h ago; the second closed after 10 min
    for incident in (first, second):
        opened = incident.opened_at
        make_probe(incident.tool, at=opened + timedelta(minutes=4), ok=False)  # the last one
        make_probe(incident.tool, at=opened + timedelta(minutes=5), ok=True)  # not a failure
    make_probe(second.tool, at=second.opened_at + timedelta(minutes=30), ok=False)  # after close
    make_probe(make_tool("bystander"), at=first.opened_at + timedelta(minutes=8), ok=False)
    ledgers = incident_ledgers([first, second])
    assert [ledger.failures_seen_until for ledger in ledgers] == [
        first.opened_at + timedelta(minutes=4),
        second.opened_at + timedelta(minutes=4),
    ]
    # Read alone, the one failed probe _incidents gives it (a minute in) is its last.
    lone = _incidents(1, first=7)[0]
    assert incident_ledger(incident=lone).failures_seen_until == lone.opened_at + timedelta(
        minutes=1
    )
