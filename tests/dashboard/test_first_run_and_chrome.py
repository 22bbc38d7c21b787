"""What a newcomer meets first: every way in on the empty board, a command for the empty Outages
page that also works in the container, the favicon, the admin's name, the probe's real page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.dashboard.factories import make_tool

pytestmark = pytest.mark.django_db


def test_the_empty_board_names_the_sdk_otlp_and_the_mcp_gateway(
    viewer_client: Client, fleet_redis: object
) -> None:
    html = viewer_client.get("/").content.decode()
    assert "No tools yet" in html
    assert "from breaker_panel import ControlPlane" in html
    for variable in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ):
        assert variable in html
    assert "breaker-panel-mcp" in html
    assert "python -m breaker_panel.mcp_gateway" in html
    assert "POST /api/v1/events" in html


def test_the_empty_outages_page_gives_a_command_that_works_without_a_venv(
    viewer_client: Client,
) -> None:
    html = viewer_client.get("/outages/").content.decode()
    assert "No outage replays yet" in html
    assert "<code>python manage.py simulate_outage</code>" in html
    assert "docker compose exec web python manage.py simulate_outage" in html


def test_favicon_is_served_without_a_login(client: Client) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 302
    assert response["Location"].endswith("favicon.svg")
    assert "login" not in response["Location"]


def test_the_admin_is_branded_and_in_the_menu_for_staff(client: Client, db: None) -> None:
    staff = User.objects.create_user("staff", password="staff-pass-1234", is_staff=True)
    client.force_login(staff)
    assert 'href="/admin/"' in client.get("/runs/").content.decode()
    admin = client.get("/admin/").content.decode()
    assert "Breaker Panel admin" in admin
    assert "Django administration" not in admin


def test_probes_link_to_the_tools_change_page_in_the_admin(
    client: Client, operator: User, fleet_redis: object
) -> None:
    operator.is_staff = True
    operator.save()
    client.force_login(operator)
    tool = make_tool("web_search")
    html = client.get(f"/tools/{tool.pk}/").content.decode()
    assert f'href="{reverse("admin:breakers_tool_change", args=[tool.pk])}"' in html
