"""The spend rule: a tool opens fleet-wide once the model spend of runs whose calls to it all
failed passes an amount within a window, on the consecutive rule's quorum (issue 25), driven
through ``POST /api/v1/events`` with real Redis and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings

from breakers.alerts.facts import build_alert_message
from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import (
    fleet_operator_action,
    fleet_record_spend,
    fleet_store,
    tool_policy_update,
)
from breakers.models import Alert, FleetTransition, Incident
from runs.fleet_interface import AcceptedModelCall, AcceptedToolCall
from tests.fleet.support import iso, next_id, run_started, tool_call

pytestmark = pytest.mark.django_db

TOOL = "web_search"
WEBHOOK = "https://hooks.slack.com/services/T0AAAA/B0BBBB/abcdefghijklmnopqrstuvwx"

Post = Callable[..., dict[str, Any]]


@pytest.fixture(autouse=True)
def spend_rule_on(settings: Settings, fleet_redis: redis.Redis) -> None:
    """The rule on for every tool at $1.00 within 10 minutes (it is off by default)."""
    settings.BREAKER_SPEND_AMOUNT_USD = 1.0
    settings.BREAKER_SPEND_WINDOW_SECONDS = 600.0


@pytest.fixture
def post(client: Client, worker_token: Callable[[str], str]) -> Post:
    """Send ``events`` as ``worker`` with its own bound token (or ``token``); the JSON reply."""

    def send(worker: str, events: list[dict[str, Any]], *, token: str | None = None) -> Any:
        response = client.post(
            "/api/v1/events",
            {"worker_id": worker, "events": events},
            content_type="application/json",
            headers={"Authorization": f"Bearer {token or worker_token(worker)}"},
        )
        assert response.status_code == 200, response.content
        return response.json()

    return send


def now_iso(ago: timedelta = timedelta(0)) -> str:
    return iso(timezone.now() - ago)


def model_call(run_id: str, cost_usd: float, *, ago: timedelta = timedelta(0)) -> dict[str, Any]:
    return {
        "id": f"mc-{next_id()}",
        "type": "model.call",
        "ts": now_iso(ago),
        "run_id": run_id,
        "step": 1,
        "model": "gpt-test",
        "input_tokens": 1000,
        "output_tokens": 100,
        "cost_usd": cost_usd,
    }


def call(run_id: str, outcome: str, *, ago: timedelta = timedelta(0)) -> dict[str, Any]:
    return tool_call(run_id, TOOL, outcome, ts=now_iso(ago))


def failing_run(spend: float, *, outcome: str = "retryable") -> tuple[str, list[dict[str, Any]]]:
    """A new run that spends ``spend`` on one model call and whose one call to the tool fails."""
    run_id = f"r-{next_id()}"
    return run_id, [
        {**run_started(run_id), "ts": now_iso()},
        model_call(run_id, spend),
        call(run_id, outcome),
    ]


def state_of(reply: dict[str, Any]) -> str:
    return str(reply["fleet"]["tools"][TOOL]["state"])


def test_spend_opens_the_tool_on_two_workers_before_five_failures(post: Post) -> None:
    _, events = failing_run(0.40)
    first = post("w1", events)
    assert state_of(first) == "closed"
    _, events = failing_run(0.70)
    reply = post("w2", events)

    assert state_of(reply) == "open"
    reason = "spend rule: $1.10 burned in 2 runs (2 workers) whose calls to web_search all failed"
    assert reply["fleet"]["tools"][TOOL]["reason"] == reason + ", within 10 min"
    opening = FleetTransition.objects.get(tool__name=TOOL, to_state="open")
    assert (opening.cause_kind, opening.opening_rule) == ("spend", "spend")
    assert opening.cause["spend_usd"] == pytest.approx(1.10)
    assert opening.cause["workers"] == {"w1": 1, "w2": 1}
    assert opening.cause["runs"] == 2
    # Two failures, not five: the consecutive rule was still far from it.
    assert fleet_store().details(TOOL).state.consecutive == 0  # type: ignore[union-attr]
    incident = Incident.objects.get(tool__name=TOOL)
    assert incident.opened_by == opening and incident.reason.startswith("spend rule: $1.10")


def test_one_worker_alone_never_opens_it_by_spend(post: Post) -> None:
    for _ in range(4):
        _, events = failing_run(2.50)
        reply = post("lonely", events)
    assert state_of(reply) == "closed"
    assert not FleetTransition.objects.exists()


def test_two_worker_ids_on_one_token_are_one_voter_for_spend(post: Post, agent_token: str) -> None:
    for worker in ("made-up-1", "made-up-2", "made-up-3"):
        _, events = failing_run(2.50)
        reply = post(worker, events, token=agent_token)
    assert state_of(reply) == "closed"
    assert not FleetTransition.objects.exists()


def test_a_success_in_a_run_takes_that_runs_spend_out_of_the_count(post: Post) -> None:
    run_id, events = failing_run(0.80)
    post("w1", events)
    post("w1", [model_call(run_id, 0.05), call(run_id, "success")])  # its tool came back
    _, events = failing_run(0.50)
    reply = post("w2", events)  # $0.50 counted: with w1's run it would be $1.35
    assert state_of(reply) == "closed"

    _, events = failing_run(0.60)
    reply = post("w1", events)
    assert state_of(reply) == "open"
    opening = FleetTransition.objects.get(to_state="open")
    assert opening.cause["spend_usd"] == pytest.approx(1.10)
    assert opening.cause["runs"] == 2


def test_spend_before_and_after_the_first_failure_counts_until_a_success(post: Post) -> None:
    run_id = f"r-{next_id()}"
    post("w1", [{**run_started(run_id), "ts": now_iso()}, model_call(run_id, 0.30)])
    post("w1", [call(run_id, "retryable"), model_call(run_id, 0.30)])
    post("w1", [model_call(run_id, 0.30)])  # $0.90 burned by a run whose calls all failed
    _, events = failing_run(0.10)
    reply = post("w2", events)
    assert state_of(reply) == "open"
    assert FleetTransition.objects.get(to_state="open").cause["spend_usd"] == pytest.approx(1.0)


def test_a_resent_batch_is_counted_once(post: Post) -> None:
    _, events = failing_run(0.40)
    for _ in range(3):
        reply = post("w1", events)
    assert reply["duplicates"] == 3
    run_id, events = failing_run(0.40)
    for _ in range(2):
        reply = post("w2", events)
    assert state_of(reply) == "closed"  # $0.80, not $2.00
    reply = post("w2", [model_call(run_id, 0.20)])
    assert state_of(reply) == "open"
    assert FleetTransition.objects.get(to_state="open").cause["spend_usd"] == pytest.approx(1.0)


def test_any_failed_outcome_counts_even_those_the_consecutive_rule_ignores(post: Post) -> None:
    # A vendor that rejects every call as bad arguments never opens by the streak.
    _, events = failing_run(0.60, outcome="semantic")
    post("w1", events)
    _, events = failing_run(0.60, outcome="semantic")
    reply = post("w2", events)
    assert state_of(reply) == "open"
    assert FleetTransition.objects.get(to_state="open").cause_kind == "spend"


def test_blocked_calls_say_nothing_of_the_tool(post: Post) -> None:
    _, events = failing_run(0.60, outcome="blocked")
    post("w1", events)
    _, events = failing_run(0.60, outcome="blocked")
    reply = post("w2", events)
    assert reply["fleet"]["tools"].get(TOOL, {"state": "closed"})["state"] == "closed"
    assert not FleetTransition.objects.exists()


def test_spend_reported_outside_the_window_does_not_count(post: Post) -> None:
    # A model call delivered late (the agent buffered it while we were unreachable) falls
    # outside the 10-minute window: it does not count, however much it was.
    run_id = f"r-{next_id()}"
    old = timedelta(minutes=11)
    post(
        "w1",
        [
            {**run_started(run_id), "ts": now_iso(old)},
            model_call(run_id, 5.0, ago=old),
            call(run_id, "retryable", ago=old),
        ],
    )
    _, events = failing_run(0.50)
    assert state_of(post("w2", events)) == "closed"


def _spend(worker: str, run: str, usd: float, at: datetime) -> AcceptedModelCall:
    event_id = f"mc-{next_id()}"
    return AcceptedModelCall(
        event_id=event_id, ts=at, voter=worker, run_key=f"{worker}:{run}", cost_usd=usd
    )


def _failure(worker: str, run: str, at: datetime) -> AcceptedToolCall:
    return AcceptedToolCall(
        event_id=f"tc-{next_id()}",
        ts=at,
        worker_id=worker,
        run_id=run,
        tool=TOOL,
        outcome="retryable",
        attempts=1,
        error="503",
        run_key=f"{worker}:{run}",
    )


def test_spend_expires_out_of_the_window_as_time_passes() -> None:
    start = timezone.now()
    fleet_record_spend(
        tool_calls=[_failure("w1", "r1", start)],
        model_calls=[_spend("w1", "r1", 0.80, start)],
        now=start,
    )
    later = start + timedelta(minutes=10, seconds=1)  # w1's $0.80 has left the window
    rows = fleet_record_spend(
        tool_calls=[_failure("w2", "r2", later)],
        model_calls=[_spend("w2", "r2", 0.50, later)],
        now=later,
    )
    assert rows == []
    rows = fleet_record_spend(
        tool_calls=[_failure("w3", "r3", later)],
        model_calls=[_spend("w3", "r3", 0.55, later)],
        now=later,
    )
    assert [row.cause_kind for row in rows] == ["spend"]
    assert rows[0].cause["spend_usd"] == pytest.approx(1.05)  # w2 and w3, not w1
    assert rows[0].cause["workers"] == {"w2": 1, "w3": 1}


def test_spend_from_before_a_tool_closed_again_cannot_reopen_it(post: Post) -> None:
    _, events = failing_run(0.60)
    post("w1", events)
    _, events = failing_run(0.60)
    assert state_of(post("w2", events)) == "open"
    operator = User.objects.create_user("op")
    fleet_operator_action(
        tool_name=TOOL, action=OperatorActionKind.RESET, reason="vendor fixed", user=operator
    )
    # A run that failed a minute ago, before the reset closed the tool, reports only now.
    run_id, minute = f"r-{next_id()}", timedelta(minutes=1)
    post(
        "w1",
        [
            {**run_started(run_id), "ts": now_iso(minute)},
            model_call(run_id, 3.0, ago=minute),
            call(run_id, "retryable", ago=minute),
        ],
    )
    _, events = failing_run(0.10)
    assert state_of(post("w2", events)) == "closed"


def test_the_rule_is_off_by_default_and_a_tool_policy_turns_it_on(
    post: Post, settings: Settings
) -> None:
    settings.BREAKER_SPEND_AMOUNT_USD = 0.0
    for worker in ("w1", "w2"):
        _, events = failing_run(3.0)
        reply = post(worker, events)
    assert state_of(reply) == "closed"

    tool_policy_update(tool_name=TOOL, changes={"spend_amount_usd": 2.0}, actor="test")
    for worker in ("w1", "w2"):
        _, events = failing_run(1.5)
        reply = post(worker, events)
    assert state_of(reply) == "open"
    assert FleetTransition.objects.get(to_state="open").cause["amount_usd"] == 2.0


def test_a_tool_policy_of_zero_turns_the_rule_off_for_that_tool(post: Post) -> None:
    _, events = failing_run(0.10)
    post("w1", events)  # the tool exists
    tool_policy_update(tool_name=TOOL, changes={"spend_amount_usd": 0.0}, actor="test")
    for worker in ("w1", "w2", "w3"):
        _, events = failing_run(3.0)
        reply = post(worker, events)
    assert state_of(reply) == "closed"


def test_a_policy_window_of_its_own_applies(post: Post) -> None:
    _, events = failing_run(0.10)
    post("w1", events)
    tool_policy_update(
        tool_name=TOOL,
        changes={"spend_window_seconds": 60.0, "spend_amount_usd": 1.0},
        actor="test",
    )
    run_id = f"r-{next_id()}"
    two_minutes = timedelta(minutes=2)
    post(
        "w1",
        [
            {**run_started(run_id), "ts": now_iso(two_minutes)},
            model_call(run_id, 0.90, ago=two_minutes),
            call(run_id, "retryable", ago=two_minutes),
        ],
    )
    _, events = failing_run(0.30)
    assert state_of(post("w2", events)) == "closed"  # $0.90 is older than its 60 s window
    _, events = failing_run(0.80)
    reply = post("w1", events)
    assert state_of(reply) == "open"
    assert reply["fleet"]["tools"][TOOL]["reason"].endswith("within 1 min")


def test_the_incident_page_and_the_slack_alert_say_which_rule_opened_it(
    post: Post, client: Client, settings: Settings
) -> None:
    settings.SLACK_WEBHOOK_URL = WEBHOOK
    _, events = failing_run(0.60)
    post("w1", events)
    _, events = failing_run(0.60)
    post("w2", events)
    incident = Incident.objects.get(tool__name=TOOL)

    alert = Alert.objects.get(transition=incident.opened_by)
    message = build_alert_message(alert)
    assert "spend rule: $1.20 burned in 2 runs" in message.text
    fields = str(message.as_payload()["blocks"])
    assert "Spend rule" in fields and "$1.20 in 2 failing runs" in fields
    assert "Consecutive failures" not in fields

    client.force_login(User.objects.create_user("viewer", password="viewer-pass-123"))
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "the fleet breaker's spend rule" in page
    assert "spend rule: $1.20 burned in 2 runs (2 workers)" in page
    board = client.get("/").content.decode()
    assert "spend rule: $1.20" in board


def test_an_incident_opened_by_the_streak_says_so(
    post: Post, client: Client, settings: Settings
) -> None:
    settings.SLACK_WEBHOOK_URL = WEBHOOK
    settings.BREAKER_SPEND_AMOUNT_USD = 1000.0
    for worker, failures in (("w1", 3), ("w2", 2)):
        run_id = f"r-{next_id()}"
        post(
            worker,
            [{**run_started(run_id), "ts": now_iso()}]
            + [call(run_id, "retryable") for _ in range(failures)],
        )
    incident = Incident.objects.get(tool__name=TOOL)
    assert incident.opened_by.opening_rule == "consecutive"
    assert incident.reason == "5 consecutive retryable failures from 2 workers"
    message = build_alert_message(Alert.objects.get(transition=incident.opened_by))
    assert "Consecutive failures" in str(message.as_payload()["blocks"])
    client.force_login(User.objects.create_user("viewer", password="viewer-pass-123"))
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "the fleet breaker's consecutive rule" in page


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BREAKER_SPEND_AMOUNT_USD", -1.0),
        ("BREAKER_SPEND_AMOUNT_USD", float("nan")),
        ("BREAKER_SPEND_WINDOW_SECONDS", 5.0),
        ("BREAKER_SPEND_WINDOW_SECONDS", 7200.0),
    ],
)
def test_a_bad_spend_setting_is_a_system_check_error(
    settings: Settings, name: str, value: float
) -> None:
    setattr(settings, name, value)
    errors = [e for e in run_checks() if e.id == "breakers.E006"]
    assert [name in e.msg for e in errors] == [True], errors


def test_an_operator_sets_the_spend_rule_on_the_tool_page(post: Post, client: Client) -> None:
    from breakers.access.operators import operators_group
    from breakers.models import Tool

    _, events = failing_run(0.10)
    post("w1", events)
    tool = Tool.objects.get(name=TOOL)
    operator = User.objects.create_user("operator", password="operator-pass-123")
    operator.groups.add(operators_group())
    client.force_login(operator)
    page = client.get(f"/tools/{tool.pk}/").content.decode()
    assert "opens at $1.00 burned by runs whose calls to it all failed" in page

    form = {"spend_amount_usd": "2.5", "spend_window_seconds": "120"}
    response = client.post(f"/tools/{tool.pk}/policy/", form)
    assert response.status_code == 303
    page = client.get(f"/tools/{tool.pk}/").content.decode()
    assert "opens at $2.50 burned by runs whose calls to it all failed, within 2 m 00 s" in page
    details = fleet_store().details(TOOL).policy
    assert (details.spend_amount_micro, details.spend_window_ms) == (2_500_000, 120_000)

    bad = client.post(f"/tools/{tool.pk}/policy/", {"spend_window_seconds": "5"})
    assert bad.status_code == 400
    assert fleet_store().details(TOOL).policy.spend_window_ms == 120_000  # nothing half-written


def test_a_reset_clears_the_spend_counted_so_far(post: Post) -> None:
    _, events = failing_run(0.80)
    post("w1", events)
    operator = User.objects.create_user("op")
    fleet_operator_action(
        tool_name=TOOL, action=OperatorActionKind.RESET, reason="start over", user=operator
    )
    _, events = failing_run(0.50)
    assert state_of(post("w2", events)) == "closed"  # $0.50, not $1.30


def test_one_worker_failing_alone_keeps_a_bounded_count(post: Post) -> None:
    # Its spend never opens the tool (one voter) and stays counted, capped, however long.
    from breakers.fleet.store import SPEND_ENTRIES_KEPT

    run_id, events = failing_run(0.01)
    post("lonely", events)
    more = [model_call(run_id, 0.01) for _ in range(SPEND_ENTRIES_KEPT + 50)]
    for start in range(0, len(more), 1000):
        post("lonely", more[start : start + 1000])
    store = fleet_store()
    client = store.client
    zset, total, voters, runs = store.spend_keys(TOOL)
    assert client.zcard(zset) == SPEND_ENTRIES_KEPT
    assert int(client.get(total)) == SPEND_ENTRIES_KEPT * 10_000
    assert client.hgetall(voters) == {b"lonely": str(SPEND_ENTRIES_KEPT).encode()}
    assert client.hlen(runs) == 1


def test_the_policy_api_sets_the_spend_rule_within_its_bounds(
    post: Post, client: Client, operator_token: str
) -> None:
    _, events = failing_run(0.10)
    post("w1", events)
    url = f"/api/v1/tools/{TOOL}/policy"
    auth = {"Authorization": f"Bearer {operator_token}"}
    for bad in (
        {"spend_amount_usd": -1},
        {"spend_window_seconds": 3601},
        {"spend_amount_usd": "x"},
    ):
        response = client.put(url, bad, content_type="application/json", headers=auth)
        assert response.status_code == 422, (bad, response.content)
    assert fleet_store().details(TOOL).policy.spend_amount_micro is None  # nothing written
    details = client.get(f"/api/v1/tools/{TOOL}", headers=auth).json()
    assert (details["spend_usd"], details["spend_workers"]) == (0.1, 1)

    body = {"spend_amount_usd": 0.75, "spend_window_seconds": 300}
    response = client.put(url, body, content_type="application/json", headers=auth)
    assert response.status_code == 200, response.content
    assert response.json()["policy"]["spend_amount_usd"] == 0.75
    assert response.json()["policy"]["spend_window_seconds"] == 300
    _, events = failing_run(0.80)
    reply = post("w2", events)
    assert state_of(reply) == "open"
    assert reply["fleet"]["tools"][TOOL]["reason"].endswith("within 5 min")


def test_calls_sent_without_a_cost_count_at_their_table_price(post: Post) -> None:
    """A model call priced by the control plane (genai-prices, cached input at its own rate)
    counts towards the spend rule at that price; one whose price is unknown counts $0."""
    priced = {"cost_usd": None, "model": "claude-opus-4-5", "input_tokens": 200_000,
              "output_tokens": 1000, "cache_read_tokens": 100_000}  # fmt: skip
    # $0.50 + $0.05 + $0.025 = $0.575 a call at claude-opus-4-5's rates from the table.
    for worker in ("w1", "w2"):
        _, events = failing_run(0.0)
        events[1] |= priced
        reply = post(worker, events)
    assert state_of(reply) == "open"
    opening = FleetTransition.objects.get(tool__name=TOOL, to_state="open")
    assert opening.cause["spend_usd"] == pytest.approx(1.15)


def test_calls_whose_price_is_unknown_do_not_open_it_by_spend(post: Post) -> None:
    for worker in ("w1", "w2"):
        _, events = failing_run(0.0)
        events[1] |= {"cost_usd": None, "model": "nobody-sells-this-model"}
        reply = post(worker, events)
    assert state_of(reply) == "closed"
