"""The admin: tools with their policy; a policy saved there reaches Redis at once."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from breakers.fleet_service import fleet_store
from breakers.models import Tool
from tests.fleet.support import Report

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("root", password="pw-root-123456"))
    return client


def test_a_policy_saved_in_the_admin_is_pushed_to_redis(
    admin_client: Client, report: Report
) -> None:
    report("w1", "web_search", "success")
    tool = Tool.objects.get(name="web_search")
    url = f"/admin/breakers/tool/{tool.pk}/change/"
    assert admin_client.get(url).status_code == 200
    form = {
        "policy-TOTAL_FORMS": "1",
        "policy-INITIAL_FORMS": "0",
        "policy-MIN_NUM_FORMS": "0",
        "policy-MAX_NUM_FORMS": "1",
        "policy-0-tool": str(tool.pk),
        "policy-0-threshold": "2",
        "policy-0-min_workers": "1",
        "policy-0-probe_kind": "",
        "policy-0-probe_method": "GET",
        "policy-0-probe_expected_status": "200",
        "policy-0-probe_timeout_seconds": "5",
    }
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    policy = fleet_store().details("web_search").policy
    assert (policy.threshold, policy.min_workers) == (2, 1)
    reply = report("w1", "web_search", "retryable", "retryable")
    assert reply["fleet"]["tools"]["web_search"]["state"] == "open"


def test_history_is_read_only(admin_client: Client) -> None:
    for model in ["fleettransition", "incident", "probe", "operatoraction"]:
        assert admin_client.get(f"/admin/breakers/{model}/").status_code == 200
        assert admin_client.get(f"/admin/breakers/{model}/add/").status_code == 403


def test_the_admin_refuses_a_policy_outside_its_bounds_naming_the_bound(
    admin_client: Client, report: Report
) -> None:
    report("w1", "web_search", "success")
    tool = Tool.objects.get(name="web_search")
    url = f"/admin/breakers/tool/{tool.pk}/change/"
    form = {
        "policy-TOTAL_FORMS": "1",
        "policy-INITIAL_FORMS": "0",
        "policy-MIN_NUM_FORMS": "0",
        "policy-MAX_NUM_FORMS": "1",
        "policy-0-tool": str(tool.pk),
        "policy-0-threshold": "2",
        "policy-0-cooldown_seconds": "1e15",
        "policy-0-probe_kind": "",
        "policy-0-probe_method": "GET",
        "policy-0-probe_expected_status": "200",
        "policy-0-probe_timeout_seconds": "5",
    }
    response = admin_client.post(url, form)
    assert response.status_code == 200
    assert "cooldown_seconds must be between 0.1 and 604800" in response.content.decode()
    assert not hasattr(Tool.objects.get(pk=tool.pk), "policy")
    assert fleet_store().details("web_search").policy.cooldown_ms is None
