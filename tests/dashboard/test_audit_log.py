"""The audit log: every operator action, newest first, who/when/what/why/before/after."""

from __future__ import annotations

import re
from datetime import timedelta

import redis
from django.contrib.auth.models import User
from django.test import Client
from pytest_django import DjangoAssertNumQueries

from breakers.models import Tool
from tests.dashboard.factories import (
    HOSTILE_NAME,
    HOSTILE_SCRIPT,
    T0,
    make_operator_action,
    make_tool,
)
from tests.dashboard.live import open_fleet_breaker

HTMX = {"HX-Request": "true"}


def audit_rows(html: str) -> list[str]:
    body = html[html.index("<tbody>") : html.index("</tbody>")]
    return re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)


def test_an_action_on_the_board_is_in_the_audit_log(
    operator_client: Client, fleet_redis: redis.Redis
) -> None:
    open_fleet_breaker("web_search")
    tool = Tool.objects.get(name="web_search")
    operator_client.post(
        f"/tools/{tool.pk}/act/",
        {"action": "force_close", "reason": "vendor confirmed the fix"},
        headers=HTMX,
    )
    html = operator_client.get("/audit/").content.decode()
    (row,) = audit_rows(html)
    assert "user:operator" in row
    assert "Force close" in row
    assert f'href="/tools/{tool.pk}/"' in row and "web_search" in row
    assert row.index("state-open") < row.index("state-forced-closed")  # before, then after
    assert "vendor confirmed the fix" in row
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row)


def test_viewers_can_read_the_audit_log(viewer_client: Client, db: None) -> None:
    make_operator_action(make_tool("web_search"), at=T0)
    html = viewer_client.get("/audit/").content.decode()
    assert len(audit_rows(html)) == 1


def test_newest_first_paged_without_counting(
    viewer_client: Client, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    tool = make_tool("web_search")
    for i in range(60):
        make_operator_action(tool, at=T0 + timedelta(minutes=i), reason=f"reason {i:02d}")
    with django_assert_max_num_queries(4) as captured:
        html = viewer_client.get("/audit/").content.decode()
    assert not any("COUNT(" in q["sql"] for q in captured.captured_queries)
    rows = audit_rows(html)
    assert len(rows) == 50
    assert "reason 59" in rows[0] and "reason 10" in rows[-1]
    page2 = viewer_client.get("/audit/?page=2", headers=HTMX).content.decode()
    assert page2.lstrip().startswith('<section id="audit-table"')
    assert len(audit_rows(page2)) == 10
    assert "reason 09" in audit_rows(page2)[0]


def test_filters_by_tool_and_action(viewer_client: Client, db: None) -> None:
    search, vector = make_tool("web_search"), make_tool("vector_db")
    make_operator_action(search, at=T0, action="force_open", after="forced_open")
    make_operator_action(vector, at=T0, action="reset", after="closed")
    assert len(audit_rows(viewer_client.get("/audit/?tool=vector_db").content.decode())) == 1
    only_open = viewer_client.get("/audit/?action=force_open").content.decode()
    assert len(audit_rows(only_open)) == 1 and "web_search" in only_open
    empty = viewer_client.get("/audit/?tool=nope").content.decode()
    assert "No actions match these filters" in empty
    assert viewer_client.get("/audit/?action=explode").status_code == 400


def test_hostile_text_renders_as_text(viewer_client: Client, operator: User) -> None:
    make_operator_action(
        make_tool(HOSTILE_NAME), at=T0, reason=HOSTILE_SCRIPT, actor=f"user:{HOSTILE_SCRIPT}"
    )
    html = viewer_client.get("/audit/").content.decode()
    assert "<img src=x" not in html and "<script>alert" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in html
