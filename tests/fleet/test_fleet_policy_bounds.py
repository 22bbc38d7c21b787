"""Issue 10 item 9: every policy number is bounded (422 naming the field and the bound, the same
bound in the model and as a database constraint), the tick survives a bad tool, and operator
actions never reach Redis without their audit row."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.utils import timezone

from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import (
    fleet_operator_action,
    fleet_state,
    fleet_store,
    fleet_tick,
    fleet_tool_details,
)
from breakers.models import POLICY_BOUNDS, OperatorAction, Tool, ToolPolicy
from tests.fleet.support import Report

pytestmark = pytest.mark.django_db


def put_policy(client: Client, token: str, tool: str, body: Any) -> Any:
    return client.put(
        f"/api/v1/tools/{tool}/policy",
        body if isinstance(body, str) else json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


@pytest.fixture
def known_tool(report: Report) -> str:
    report("w1", "web_search", "success")
    return "web_search"


OUT_OF_BOUNDS = [
    ("cooldown_seconds", 1e15),
    ("cooldown_seconds", 1e308),
    ("cooldown_seconds", 0.0001),
    ("max_cooldown_seconds", 1e15),
    ("threshold", 10**12),
    ("threshold", 0),
    ("min_workers", 10**12),
    ("min_workers", 0),
    ("probe_timeout_seconds", 1e308),
    ("probe_timeout_seconds", 0),
    ("probe_expected_status", 10**6),
    ("probe_expected_status", 99),
]


@pytest.mark.parametrize(("field", "value"), OUT_OF_BOUNDS)
def test_an_out_of_bounds_policy_number_is_a_422_naming_the_field_and_bound(
    client: Client, operator_token: str, known_tool: str, field: str, value: float
) -> None:
    response = put_policy(client, operator_token, known_tool, {field: value})
    assert response.status_code == 422, response.content
    text = response.content.decode()
    assert field in text
    low, high = POLICY_BOUNDS[field]
    assert str(high) in text or str(low) in text
    assert not ToolPolicy.objects.filter(tool__name=known_tool).exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("spend_amount_usd", False),
        ("threshold", True),
        ("min_workers", True),
        ("cooldown_seconds", True),
    ],
)
def test_true_or_false_is_not_a_policy_number(
    client: Client, operator_token: str, known_tool: str, field: str, value: bool
) -> None:
    # Found by the API fuzzer: pydantic reads JSON false as 0 and true as 1, so a spend amount
    # of false (0 is in bounds: "off") was accepted.
    response = put_policy(client, operator_token, known_tool, {field: value})
    assert response.status_code == 422, response.content
    assert field in response.content.decode()
    assert not ToolPolicy.objects.filter(tool__name=known_tool).exists()


@pytest.mark.parametrize("literal", ["1e999", "Infinity", "NaN", "-Infinity"])
def test_non_finite_cooldowns_are_422_not_500(
    client: Client, operator_token: str, known_tool: str, literal: str
) -> None:
    response = put_policy(client, operator_token, known_tool, f'{{"cooldown_seconds": {literal}}}')
    assert response.status_code in (400, 422), response.content


def test_a_policy_at_its_bounds_is_accepted(
    client: Client, operator_token: str, known_tool: str
) -> None:
    body = {
        "threshold": POLICY_BOUNDS["threshold"][1],
        "min_workers": POLICY_BOUNDS["min_workers"][1],
        "cooldown_seconds": POLICY_BOUNDS["cooldown_seconds"][1],
        "max_cooldown_seconds": POLICY_BOUNDS["max_cooldown_seconds"][1],
    }
    response = put_policy(client, operator_token, known_tool, body)
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cooldown_seconds", 1e15),
        ("max_cooldown_seconds", 1e15),
        ("threshold", 10**9),
        ("min_workers", 10**9),
        ("probe_timeout_seconds", 1e6),
        ("probe_expected_status", 1000),
    ],
)
def test_the_database_refuses_out_of_bounds_policies(field: str, value: float) -> None:
    tool = Tool.objects.create(name="t")
    with pytest.raises(IntegrityError), transaction.atomic():
        ToolPolicy.objects.create(tool=tool, **{field: value})


def test_the_model_validation_the_admin_uses_names_the_bound() -> None:
    from django.core.exceptions import ValidationError

    tool = Tool.objects.create(name="t")
    policy = ToolPolicy(tool=tool, cooldown_seconds=1e15, threshold=10**9)
    with pytest.raises(ValidationError) as caught:
        policy.full_clean()
    assert set(caught.value.message_dict) >= {"cooldown_seconds", "threshold"}


def _break_in_redis(store_client: redis.Redis, tool: str, **fields: str) -> None:
    key = fleet_store().tool_keys(tool)[0]
    store_client.hset(key, mapping=fields)


def test_one_tool_with_exponent_form_values_in_redis_does_not_stop_the_tick(
    report: Report, fleet_redis: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    for tool in ("bad_tool", "good_tool"):
        report("w1", tool, "retryable", "retryable", "retryable")
        report("w2", tool, "retryable", "retryable")
    assert set(Tool.objects.filter(state="open").values_list("name", flat=True)) == {
        "bad_tool",
        "good_tool",
    }
    # What a cooldown of 1e15 s left behind before the bounds: Lua wrote it in exponent form.
    _break_in_redis(fleet_redis, "bad_tool", open_until="1.0000017646336e+18", p_cooldown="1e+18")
    _break_in_redis(fleet_redis, "aaa_garbage", seq="x", auto="open", open_until="nonsense")
    fleet_redis.sadd(fleet_store().tools_key, "aaa_garbage")
    with caplog.at_level(logging.ERROR, logger="breakers.fleet_service"):
        fleet_tick(now=timezone.now() + timedelta(hours=1))
    assert Tool.objects.get(name="good_tool").state == "half_open"
    assert Tool.objects.get(name="bad_tool").state == "open"
    # The readers of the hash survive it too: the agents' fleet view and the operator's page.
    assert fleet_state().tools["bad_tool"]["state"] == "open"
    details = fleet_tool_details(tool_name="bad_tool")
    assert details["open_until"].year == 9999


def test_an_exception_in_one_tools_step_is_logged_and_skipped(
    report: Report, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for tool in ("aaa_bad", "zzz_good"):
        report("w1", tool, "retryable", "retryable", "retryable")
        report("w2", tool, "retryable", "retryable")
    store = fleet_store()
    advance = store.advance

    def failing(tool: str, *, now: int) -> Any:
        if tool == "aaa_bad":
            raise RuntimeError("boom")
        return advance(tool, now=now)

    monkeypatch.setattr(store, "advance", failing)
    with caplog.at_level(logging.ERROR, logger="breakers.fleet_service"):
        fleet_tick(now=timezone.now() + timedelta(hours=1))
    assert Tool.objects.get(name="zzz_good").state == "half_open"
    assert any("aaa_bad" in record.getMessage() for record in caplog.records)


def test_a_reset_of_a_tool_with_a_huge_cooldown_is_applied_and_audited(
    report: Report, fleet_redis: redis.Redis
) -> None:
    report("w1", "web_search", "retryable", "retryable", "retryable")
    report("w2", "web_search", "retryable", "retryable")
    _break_in_redis(fleet_redis, "web_search", open_until="1.0000017646336e+18", cooldown="1e+18")
    row = fleet_operator_action(
        tool_name="web_search", action=OperatorActionKind.RESET, reason="stuck", user=_operator()
    )
    assert OperatorAction.objects.filter(pk=row.pk).exists()
    assert fleet_store().details("web_search").state.auto == "closed"  # type: ignore[union-attr]
    assert Tool.objects.get(name="web_search").state == "closed"


def _operator() -> Any:
    from django.contrib.auth.models import User

    return User.objects.create_user("ops")


def test_an_operator_action_whose_recording_fails_after_redis_keeps_its_audit_row(
    report: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    from breakers.fleet_service import commands

    report("w1", "web_search", "success")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("year 33658 is out of range")

    monkeypatch.setattr(commands, "persist_transitions", broken)
    row = fleet_operator_action(
        tool_name="web_search",
        action=OperatorActionKind.FORCE_OPEN,
        reason="vendor down",
        user=_operator(),
    )
    audit = OperatorAction.objects.get(pk=row.pk)
    assert audit.after["state"] == "forced_open"
    assert fleet_store().details("web_search").state.forced == "forced_open"  # type: ignore[union-attr]


def test_an_operator_action_whose_audit_row_cannot_be_written_never_reaches_redis(
    report: Report,
) -> None:
    report("w1", "web_search", "success")
    with connection.cursor() as cursor:
        cursor.execute(
            "ALTER TABLE breakers_operatoraction ADD CONSTRAINT no_rows CHECK (false) NOT VALID"
        )
    with pytest.raises(IntegrityError):
        fleet_operator_action(
            tool_name="web_search",
            action=OperatorActionKind.FORCE_OPEN,
            reason="vendor down",
            user=_operator(),
        )
    assert fleet_store().details("web_search").state.forced == ""  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BREAKER_COOLDOWN_SECONDS", 1e15),
        ("BREAKER_THRESHOLD", 0),
        ("BREAKER_TRIAL_LEASE_SECONDS", 1e12),
        ("BREAKER_TICK_SECONDS", 0),
    ],
)
def test_out_of_bounds_fleet_settings_fail_the_system_checks(
    settings: Any, name: str, value: float
) -> None:
    from breakers.checks import check_breaker_settings

    assert check_breaker_settings() == []
    setattr(settings, name, value)
    errors = check_breaker_settings()
    assert errors and name in errors[0].msg
