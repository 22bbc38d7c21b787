"""Issue 10 item 6 beyond ingest: deeply nested JSON on any API endpoint is a 400, never a 500."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.fleet.conftest import Report

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
        path, body, content_type="application/json", headers={"Authorization": f"Bearer {operator_token}"}
    )
    assert response.status_code in (400, 422), response.content[:500]
    if len(body) > 10_000:
        assert response.status_code == 400
        assert b"nest" in response.content
