"""Every page needs a login, except the login page; the token-authenticated API is left alone."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.dashboard.factories import T0, make_incident, make_run, make_tool

# Every dashboard page; {tool}, {incident} and {run} are filled with rows made by ``url_of``.
PAGES = [
    "/",
    "/incidents/",
    "/outages/",
    "/audit/",
    "/alerts/",
    "/runs/",
    "/runs/?agent=research",
    "/tools/{tool}/",
    "/incidents/{incident}/",
    "/runs/{run}/",
]


def url_of(path: str) -> str:
    """The page's URL, with the rows it names created first."""
    tool = make_tool("web_search-secret")
    incident = make_incident(tool, opened_at=T0)
    run = make_run("r-secret")
    return path.format(tool=tool.pk, incident=incident.pk, run=run.pk)


@pytest.mark.django_db
@pytest.mark.parametrize("path", PAGES)
def test_anonymous_user_is_sent_to_login(client: Client, path: str) -> None:
    response = client.get(url_of(path))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")
    assert "secret" not in response.content.decode()


@pytest.mark.django_db
def test_anonymous_user_cannot_open_a_run(client: Client) -> None:
    run = make_run("r-secret")
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 302
    assert "r-secret" not in response.content.decode()


@pytest.mark.django_db
def test_login_page_is_public(client: Client) -> None:
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="username"' in html and 'name="password"' in html
    # No navigation for someone who is not signed in.
    assert "Audit log" not in html


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/fleet", "/api/v1/no-such-endpoint"])
def test_api_paths_are_not_redirected_to_login(client: Client, path: str) -> None:
    # The API answers for itself (401 with a token error); an HTML login redirect would confuse
    # every agent client. Whatever answers here, it is not the login redirect.
    response = client.get(path)
    assert not (response.status_code == 302 and "/accounts/login/" in response["Location"])


@pytest.mark.django_db
def test_api_endpoint_without_a_token_gets_401_not_a_redirect(client: Client) -> None:
    assert client.get("/api/v1/fleet").status_code == 401


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/docs", "/api/v1/openapi.json"])
def test_api_docs_are_a_page_for_people_behind_the_login(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


@pytest.mark.django_db
def test_htmx_request_from_an_expired_session_redirects_the_whole_page(client: Client) -> None:
    response = client.get("/runs/?status=failed", headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert response["HX-Redirect"].startswith("/accounts/login/?next=")


def test_logging_in_with_the_form_opens_the_page_asked_for(client: Client, viewer: User) -> None:
    response = client.post(
        "/accounts/login/",
        {"username": "viewer", "password": "viewer-pass-123", "next": "/runs/"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/runs/"
    assert client.get("/runs/").status_code == 200


def test_wrong_password_shows_an_error(client: Client, viewer: User) -> None:
    response = client.post("/accounts/login/", {"username": "viewer", "password": "nope"})
    assert response.status_code == 200
    assert 'role="alert"' in response.content.decode()


@pytest.mark.parametrize("path", PAGES)
def test_signed_in_user_sees_every_page(viewer_client: Client, path: str) -> None:
    assert viewer_client.get(url_of(path)).status_code == 200


def test_logout_is_a_post(viewer_client: Client) -> None:
    assert viewer_client.get("/accounts/logout/").status_code == 405
    response = viewer_client.post("/accounts/logout/")
    assert response.status_code == 302
    assert viewer_client.get("/runs/").status_code == 302


def test_admin_link_only_for_staff(client: Client, viewer: User) -> None:
    client.force_login(viewer)
    assert 'href="/admin/"' not in client.get("/runs/").content.decode()
    viewer.is_staff = True
    viewer.save()
    assert 'href="/admin/"' in client.get("/runs/").content.decode()


def test_pages_carry_csrf_for_htmx_and_load_htmx_locally(viewer_client: Client) -> None:
    html = viewer_client.get("/runs/").content.decode()
    assert 'hx-headers=\'{"X-CSRFToken": "' in html
    assert '<script src="/static/django_htmx/htmx-2.min.js" defer>' in html
    assert "://" not in html.split("<body")[0]  # nothing in <head> comes from another host


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/tools/{tool}/"),
        ("get", "/tools/{tool}/act/"),
        ("post", "/tools/{tool}/act/"),
        ("post", "/tools/{tool}/policy/"),
        ("post", "/tools/{tool}/unsilence/"),
        ("get", "/incidents/{incident}/"),
    ],
)
def test_tool_and_incident_pages_and_actions_need_a_login(
    client: Client, method: str, path: str
) -> None:
    tool = make_tool("web_search-secret")
    incident = make_incident(tool, opened_at=T0)
    url = path.format(tool=tool.pk, incident=incident.pk)
    response = getattr(client, method)(url, {"action": "force_open", "reason": "anonymous"})
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")
    assert "web_search-secret" not in response.content.decode()
    assert not tool.operator_actions.exists()
