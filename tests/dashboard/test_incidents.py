"""Incidents: the list, and an incident's timeline with its cost next to a baseline."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import redis
from django.test import Client
from pytest_django import DjangoAssertNumQueries

from breakers.alerts import incident_cost
from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import fleet_operator_action
from breakers.models import Incident
from controlplane.dashboard.incidents import incident_alerts, incident_page
from runs.incident_runs import incident_measures, runs_affected
from tests.dashboard.factories import (
    HOSTILE_NAME,
    HOSTILE_SCRIPT,
    T0,
    make_alert,
    make_incident,
    make_model_call,
    make_operator_action,
    make_probe,
    make_run,
    make_tool,
    make_tool_call,
    make_transition,
    make_worker,
)
from tests.dashboard.live import open_fleet_breaker


def kinds(html: str) -> list[str]:
    return re.findall(r'<li class="tl tl-([a-z]+)">', html)


def outage_incident() -> Incident:
    """web_search fails on two workers from T0, opens at T0+40 s, closes at T0+5 m."""
    tool = make_tool("web_search")
    w1, w2 = make_worker("w-1"), make_worker("w-2")
    runs = {w: make_run(f"r-{w.worker_id}", worker=w, started_at=T0) for w in (w1, w2)}
    events = []
    for i, worker in enumerate([w1, w2, w1, w2, w1]):
        call = make_tool_call(
            runs[worker],
            step=i + 1,
            ts=T0 + timedelta(seconds=10 * i),
            outcome="retryable",
            attempts=5,
            error=f"ToolFailure: 503 from vendor (call {i})",
        )
        events.append(call.event_id)
    opened = T0 + timedelta(seconds=40, milliseconds=5)
    incident = make_incident(
        tool,
        opened_at=opened,
        closed_at=T0 + timedelta(minutes=5),
        cause={"consecutive": 5, "workers": {"w-1": 3, "w-2": 2}, "events": events},
    )
    make_probe(tool, at=T0 + timedelta(minutes=1), ok=False)
    make_operator_action(
        tool, at=T0 + timedelta(minutes=2), action="force_open", after="forced_open"
    )
    make_probe(tool, at=T0 + timedelta(minutes=4, seconds=59), ok=True)
    return incident


def test_timeline_tells_the_incident_in_order(viewer_client: Client) -> None:
    incident = outage_incident()
    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()
    assert kinds(html) == [
        "firstfailure",
        "workerfailures",
        "workerfailures",
        "open",
        "probe",
        "action",
        "probe",
        "close",
    ]
    assert "First failure of the streak" in html
    assert "ToolFailure: 503 from vendor (call 0)" in html
    assert "3 retryable failures" in html and "2 retryable failures" in html
    assert "5 consecutive retryable failures from 2 workers: w-1 (3), w-2 (2)" in html
    assert "trial by the probe: success" in html


def test_comparison_against_the_same_length_before(viewer_client: Client) -> None:
    incident = outage_incident()
    tool_opened = incident.opened_at
    before_run = make_run("r-before", worker=make_worker("w-1"), started_at=T0 - timedelta(hours=1))
    # Before the incident: one run, one healthy call and one model call.
    make_tool_call(before_run, step=1, ts=tool_opened - timedelta(minutes=2))
    make_model_call(
        before_run, step=1, ts=tool_opened - timedelta(minutes=2), cost_usd=Decimal("0.05")
    )
    # During: a run that had the tool removed (no call), spending on the model.
    during_run = make_run("r-during", worker=make_worker("w-3"), degraded=True, started_at=T0)
    make_transition(
        worker=during_run.worker, run=during_run, ts=tool_opened + timedelta(seconds=30)
    )
    for step in range(3):
        make_model_call(
            during_run,
            step=step,
            ts=tool_opened + timedelta(seconds=40 + step),
            cost_usd=Decimal("0.25"),
        )
    page = incident_page(incident=incident)
    during, before = page.comparison.during, page.comparison.before
    assert (during.runs, during.degraded_runs, during.model_calls) == (1, 1, 3)
    assert during.model_spend_usd == Decimal("0.75")
    assert (before.runs, before.model_calls, before.model_spend_usd) == (3, 1, Decimal("0.05"))
    # The streak's failures came before the opening: they are the baseline's vendor calls.
    assert (before.tool_calls, before.vendor_calls, before.failures) == (6, 6, 5)
    assert before.vendor_attempts == 26
    assert (during.tool_calls, during.vendor_calls) == (0, 0)
    assert before.end == during.start == incident.opened_at
    assert during.end - during.start == before.end - before.start
    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "$0.7500" in html and "r-during" in html


def test_charts_have_a_place(viewer_client: Client) -> None:
    incident = outage_incident()
    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()
    assert '<section id="incident-charts"' in html


def test_alerts_sent_are_in_the_timeline_without_the_webhook(viewer_client: Client) -> None:
    incident = outage_incident()
    opened = incident.opened_at
    make_alert(incident, at=opened + timedelta(seconds=2))
    # Filed before the incident row existed: found through the opening transition.
    make_alert(
        incident,
        at=opened + timedelta(seconds=3),
        channel="#platform",
        state="failed",
        attempts=5,
        last_error="429 rate limited",
        filed_under_incident=False,
    )
    make_alert(incident, at=incident.closed_at, kind="closed")  # type: ignore[arg-type]
    alerts = incident_alerts(incident=incident)
    assert [(a.kind, a.channel, a.state) for a in alerts] == [
        ("opened", "#oncall-tools", "sent"),
        ("opened", "#platform", "failed"),
        ("closed", "#oncall-tools", "sent"),
    ]
    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()
    assert kinds(html) == [
        "firstfailure",
        "workerfailures",
        "workerfailures",
        "open",
        "alert",
        "alert",
        "probe",
        "action",
        "probe",
        "close",
        "alert",
    ]
    assert "Alert sent" in html and "Alert failed" in html and "after 5 attempts" in html
    assert "429 rate limited" in html
    assert "hooks.slack.com" not in html


def test_incident_opened_by_the_real_fleet_breaker(
    viewer_client: Client, operator: object, fleet_redis: redis.Redis
) -> None:
    open_fleet_breaker("web_search")
    incident = Incident.objects.get()
    assert incident.closed_at is None
    fleet_operator_action(
        tool_name="web_search",
        action=OperatorActionKind.RESET,
        reason="vendor recovered",
        user=operator,  # type: ignore[arg-type]
    )
    incident.refresh_from_db()
    assert incident.closed_at is not None
    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()
    assert kinds(html)[0] == "firstfailure"
    assert kinds(html)[-1] == "close"
    assert "reset by user:operator: vendor recovered" in html
    assert "ToolFailure: 503 from vendor" in html


def test_ongoing_incident_says_so(viewer_client: Client, fleet_redis: redis.Redis) -> None:
    open_fleet_breaker("web_search")
    incident = Incident.objects.get()
    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "Still out of the fleet." in html
    assert kinds(html)[-1] == "ongoing"


def test_forced_open_incident_starts_with_the_operator(
    viewer_client: Client, operator: object, fleet_redis: redis.Redis
) -> None:
    from tests.dashboard.live import calls

    calls("web_search", "w-1", "success")
    fleet_operator_action(
        tool_name="web_search",
        action=OperatorActionKind.FORCE_OPEN,
        reason="vendor maintenance window",
        user=operator,  # type: ignore[arg-type]
    )
    incident = Incident.objects.get()
    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()
    assert kinds(html) == ["open", "ongoing"]
    assert "force open by user:operator: vendor maintenance window" in html
    assert "an operator" in html


def test_list_newest_first_with_filters(viewer_client: Client) -> None:
    tool = make_tool("web_search")
    other = make_tool("vector_db")
    old = make_incident(tool, opened_at=T0, closed_at=T0 + timedelta(minutes=3))
    new = make_incident(other, opened_at=T0 + timedelta(hours=1))
    html = viewer_client.get("/incidents/").content.decode()
    assert html.index(f"/incidents/{new.pk}/") < html.index(f"/incidents/{old.pk}/")
    assert "3 m 00 s" in html and "ongoing" in html
    open_only = viewer_client.get("/incidents/?status=open").content.decode()
    assert f"/incidents/{new.pk}/" in open_only and f"/incidents/{old.pk}/" not in open_only
    by_tool = viewer_client.get("/incidents/?tool=web_search").content.decode()
    assert f"/incidents/{old.pk}/" in by_tool and f"/incidents/{new.pk}/" not in by_tool
    assert viewer_client.get("/incidents/?status=maybe").status_code == 400


def test_list_pages_without_counting(
    viewer_client: Client, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    tool = make_tool("web_search")
    for i in range(55):
        make_incident(
            tool, opened_at=T0 + timedelta(hours=i), closed_at=T0 + timedelta(hours=i, minutes=1)
        )
    with django_assert_max_num_queries(4) as captured:
        html = viewer_client.get("/incidents/").content.decode()
    assert not any("COUNT(" in q["sql"] for q in captured.captured_queries)
    assert "Older →" in html
    page2 = viewer_client.get("/incidents/?page=2").content.decode()
    assert page2.count('href="/incidents/') - page2.count('href="/incidents/"') == 10
    assert "← Newer" in page2 and "Older →" not in page2


def test_incident_page_cost_is_bounded(
    viewer_client: Client, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    incident = outage_incident()
    # The outage ledger takes about a dozen aggregate queries of its own, however many runs.
    with django_assert_max_num_queries(32):
        assert viewer_client.get(f"/incidents/{incident.pk}/").status_code == 200


def test_hostile_text_renders_as_text(viewer_client: Client) -> None:
    tool = make_tool(HOSTILE_NAME)
    worker = make_worker(HOSTILE_SCRIPT)
    run = make_run(HOSTILE_SCRIPT, worker=worker, started_at=T0)
    call = make_tool_call(
        run, step=1, ts=T0, tool=HOSTILE_NAME, outcome="retryable", error=HOSTILE_SCRIPT
    )
    incident = make_incident(
        tool,
        opened_at=T0 + timedelta(seconds=1),
        cause={"consecutive": 1, "workers": {HOSTILE_SCRIPT: 1}, "events": [call.event_id]},
        reason=HOSTILE_SCRIPT,
    )
    make_operator_action(
        tool, at=T0 + timedelta(seconds=2), reason=HOSTILE_SCRIPT, actor=HOSTILE_NAME
    )
    for url in (f"/incidents/{incident.pk}/", "/incidents/"):
        html = viewer_client.get(url).content.decode()
        assert "<img src=x" not in html, url
        assert "<script>alert" not in html, url
        assert "&lt;img src=x onerror=alert(1)&gt;" in html, url


def test_runs_affected_is_half_open_and_the_alerts_count_the_same_runs(db: None) -> None:
    worker = make_worker("w-1")
    start, end = T0, T0 + timedelta(minutes=10)
    at_start = make_run("r-at-start", worker=worker, started_at=start)
    make_tool_call(at_start, step=1, ts=start, outcome="retryable")
    removed = make_run("r-removed", worker=worker, started_at=start)
    make_transition(worker=worker, run=removed, scope="fleet", ts=start + timedelta(minutes=5))
    make_model_call(removed, step=1, ts=start + timedelta(minutes=5))
    at_end = make_run("r-at-end", worker=worker, started_at=start)
    make_tool_call(at_end, step=1, ts=end)  # belongs to the next window
    make_model_call(at_end, step=2, ts=end)
    affected = runs_affected(tool="web_search", start=start, end=end)
    assert sorted(affected.values_list("run_id", flat=True)) == ["r-at-start", "r-removed"]
    during = incident_measures(tool="web_search", start=start, end=end)
    assert (during.runs, during.model_calls, during.tool_calls) == (2, 1, 1)
    assert incident_cost(tool_name="web_search", start=start, end=end) == during
    after = incident_measures(tool="web_search", start=end, end=end + timedelta(minutes=10))
    assert (after.runs, after.tool_calls) == (1, 1)


def test_a_long_runs_table_is_folded(viewer_client: Client) -> None:
    """Up to 50 runs affected: the newest ten are shown, the rest sit in "N more runs"."""
    tool = make_tool("web_search")
    worker = make_worker("w-1")
    for n in range(14):
        run = make_run(f"r-{n:02d}", worker=worker, started_at=T0 + timedelta(seconds=n))
        make_tool_call(run, step=1, ts=T0 + timedelta(seconds=n), outcome="retryable")
    incident = make_incident(tool, opened_at=T0, closed_at=T0 + timedelta(minutes=5))
    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()
    section = html[html.index('id="affected-title"') :]
    shown, folded = section.split('<details class="fold">', 1)
    folded = folded.split("</details>", 1)[0]
    assert "<summary>4 more runs</summary>" in folded
    # Newest first: r-13 .. r-04 shown, r-03 .. r-00 folded, each run once.
    assert [f"r-{n:02d}" in shown for n in range(14)] == [False] * 4 + [True] * 10
    assert all(f"r-{n:02d}" in folded for n in range(4))
