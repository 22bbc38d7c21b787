"""Issue 10 item 6 beyond ingest: deeply nested JSON on any API endpoint is a 400, never a 500."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.fleet.support import Report

pytestmark = pytest.mark.django_db

DEEP = 100_000


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/api/v1/tools/web_search/force-open", '{"reason": ' + nested(DEEP) + "}"),
        ("post", "/api/v1/tools/web_search/reset", nested(DEEP)),
        ("put", "/api/v1/tools/web_search/policy", '{"threshold": ' + nested(DEEP) + "}"),
        ("put", "/api/v1/tools/web_search/policy", '{"probe_url": ' + nested(DEEP) + "}"),
        ("post", "/api/v1/tools/web_search/trial", '{"worker_id": ' + nested(DEEP) + "}"),
        ("post", "/api/v1/tools/web_search/trial", '{"worker_id": ' + nested(50) + "}"),
    ],
)
def test_deeply_nested_json_is_a_400_naming_the_problem(
    client: Client, operator_token: str, report: Report, method: str, path: str, body: str
) -> None:
    report("w1", "web_search", "success")
    response = getattr(client, method)(
        path,
        body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {operator_token}"},
    )
    assert response.status_code in (400, 422), response.content[:500]
    if len(body) > 10_000:
        assert response.status_code == 400
        assert b"nest" in response.content


def test_an_api_path_no_route_matches_is_a_json_404(client: Client, operator_token: str) -> None:
    # `path:` does not match a newline: this never reaches a view.
    response = client.get(
        "/api/v1/tools/a%0Ab", headers={"Authorization": f"Bearer {operator_token}"}
    )
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ("[1, 2]", 400, b"JSON object"),
        ('{"reason": NaN}', 400, b"not valid JSON"),
        ("{", 400, b"not valid JSON"),
        (b"\xff\xfe", 400, b"not valid JSON"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_a_400_saying_why(
    client: Client, operator_token: str, report: Report, body: str, status: int, message: bytes
) -> None:
    report("w1", "web_search", "success")
    response = client.post(
        "/api/v1/tools/web_search/force-open",
        body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {operator_token}"},
    )
    assert response.status_code == status, response.content
    assert message in response.content


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("post", "/api/v1/tools/web_search/force-open", {"reason": "down\u0000"}, 400),
        ("put", "/api/v1/tools/web_search/policy", {"probe_callable": "a\u0000b"}, 422),
        ("put", "/api/v1/tools/web_search/policy", {"probe_url": "http://x.test/\u0000"}, 422),
        ("get", "/api/v1/tools/web%00search", None, 404),
        ("post", "/api/v1/tools/web%00search/reset", {"reason": "r"}, 404),
        ("post", "/api/v1/tools/web%00search/trial", {"worker_id": "w1"}, 404),
        ("get", "/api/v1/tools/" + "x" * 300, None, 404),
    ],
)
def test_a_nul_character_anywhere_is_a_4xx_not_a_database_error(
    client: Client,
    operator_token: str,
    report: Report,
    method: str,
    path: str,
    body: object,
    status: int,
) -> None:
    report("w1", "web_search", "success")
    kwargs = {"content_type": "application/json"} if body is not None else {}
    response = getattr(client, method)(
        path, body, headers={"Authorization": f"Bearer {operator_token}"}, **kwargs
    )
    assert response.status_code == status, response.content
