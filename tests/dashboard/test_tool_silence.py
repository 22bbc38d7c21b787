"""A tool's silence (set from Slack) is shown on its page and can be ended early there or through
the API: once, audited with who and from where; ending it again is an answer, not an error."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from breakers.models import OperatorAction, Tool, ToolSilence
from runs.models import AgentToken
from tests.dashboard.factories import HOSTILE_SCRIPT, make_incident, make_tool

pytestmark = pytest.mark.django_db


def silence_of(tool: Tool, **fields: object) -> ToolSilence:
    values: dict[str, object] = {
        "until": timezone.now() + timedelta(hours=2),
        "set_by": "@ana via Slack",
        "via": "Slack (@ana)",
    }
    values.update(fields)
    return ToolSilence.objects.create(tool=tool, **values)


def section(html: str, title_id: str) -> str:
    start = html.index(f'aria-labelledby="{title_id}"')
    return html[start : html.index("</section>", start)]


def end(client: Client, tool: Tool, silence: ToolSilence | str) -> object:
    value = silence if isinstance(silence, str) else str(silence.pk)
    return client.post(f"/tools/{tool.pk}/unsilence/", {"silence": value}, follow=True)


def test_the_tool_page_shows_the_silence_in_force_escaped(operator_client: Client) -> None:
    tool = make_tool("web_search", state="open")
    silence_of(tool, set_by=f"@{HOSTILE_SCRIPT} via Slack")
    html = operator_client.get(f"/tools/{tool.pk}/").content.decode()
    panel = section(html, "silence-title")
    assert "Repeat alerts of this tool are held until" in panel
    assert HOSTILE_SCRIPT not in html
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in panel
    assert "End silence now" in panel and 'name="csrfmiddlewaretoken"' in panel


def test_a_silence_until_recovery_names_its_incident(operator_client: Client) -> None:
    tool = make_tool("web_search", state="open")
    incident = make_incident(tool, opened_at=timezone.now())
    silence_of(tool, until=None, incident=incident)
    panel = section(operator_client.get(f"/tools/{tool.pk}/").content.decode(), "silence-title")
    assert "until its incident recovers" in panel
    assert f'href="/incidents/{incident.pk}/"' in panel


def test_no_panel_without_a_silence_in_force(operator_client: Client) -> None:
    tool = make_tool("web_search", state="open")
    silence_of(tool, until=timezone.now() - timedelta(minutes=1))  # ran out
    silence_of(tool, ended_at=timezone.now())  # ended
    assert 'id="silence"' not in operator_client.get(f"/tools/{tool.pk}/").content.decode()


def test_a_viewer_sees_the_silence_but_cannot_end_it(viewer_client: Client) -> None:
    tool = make_tool("web_search", state="open")
    silence = silence_of(tool)
    panel = section(viewer_client.get(f"/tools/{tool.pk}/").content.decode(), "silence-title")
    assert "@ana via Slack" in panel and "End silence now" not in panel
    response = viewer_client.post(f"/tools/{tool.pk}/unsilence/", {"silence": str(silence.pk)})
    assert response.status_code == 403
    assert ToolSilence.objects.get().ended_at is None


def test_ending_from_the_tool_page_is_audited_once(operator_client: Client, operator: User) -> None:
    tool = make_tool("web_search", state="open")
    silence = silence_of(tool)
    response = end(operator_client, tool, silence)
    html = response.content.decode()  # type: ignore[attr-defined]
    assert "The silence of web_search has ended: alerts resume." in html
    assert 'id="silence"' not in html
    silence.refresh_from_db()
    assert silence.ended_at is not None
    assert (silence.ended_by, silence.ended_via) == ("user:operator", "tool page")
    row = OperatorAction.objects.get(action="unsilence")
    assert (row.actor, row.user, row.via) == ("user:operator", operator, "")
    assert "ended early the silence by @ana via Slack (until" in row.reason
    audit = operator_client.get("/audit/?action=unsilence").content.decode()
    assert "End silence" in audit and "user:operator" in audit

    again = end(operator_client, tool, silence)
    assert again.status_code == 200  # type: ignore[attr-defined]
    text = again.content.decode()  # type: ignore[attr-defined]
    assert "This silence of web_search was already ended at" in text
    assert "by user:operator; nothing was changed." in text
    assert OperatorAction.objects.filter(action="unsilence").count() == 1


@pytest.mark.parametrize("value", ["", "abc", "1" * 40, "999999"])
def test_a_form_that_names_no_silence_of_the_tool_changes_nothing(
    operator_client: Client, value: str
) -> None:
    tool = make_tool("web_search", state="open")
    other = silence_of(make_tool("other_tool", state="open"))
    response = end(operator_client, tool, value or "")
    assert response.status_code == 200  # type: ignore[attr-defined]
    text = response.content.decode()  # type: ignore[attr-defined]
    assert "nothing was changed" in text
    response = end(operator_client, tool, other)  # another tool's silence: not this one's
    assert "web_search has no silence in force" in response.content.decode()  # type: ignore[attr-defined]
    assert ToolSilence.objects.get().ended_at is None
    assert not OperatorAction.objects.exists()


def test_a_silence_that_ran_out_is_told_as_such(operator_client: Client) -> None:
    tool = make_tool("web_search", state="open")
    silence = silence_of(tool, until=timezone.now() - timedelta(minutes=1))
    text = end(operator_client, tool, silence).content.decode()  # type: ignore[attr-defined]
    assert "This silence of web_search already ran out at" in text
    assert not OperatorAction.objects.exists()


# -- the API ------------------------------------------------------------------------------------


def unsilence(client: Client, tool: str, token: str) -> object:
    return client.post(
        f"/api/v1/tools/{tool}/unsilence", headers={"Authorization": f"Bearer {token}"}
    )


def test_the_api_ends_the_silence_with_an_operator_token_once(client: Client) -> None:
    token = AgentToken.issue(name="ops-bot", is_operator=True)[1]
    tool = make_tool("web_search", state="open")
    silence_of(tool)
    response = unsilence(client, "web_search", token)
    assert response.status_code == 200, response.content  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["tool"] == "web_search" and body["set_by"] == "@ana via Slack"
    assert body["ended_by"].startswith("token:ops-bot") and body["ended_at"]
    row = OperatorAction.objects.get(action="unsilence")
    assert row.token is not None and ToolSilence.objects.get().ended_via == "API"

    again = unsilence(client, "web_search", token)
    assert again.status_code == 409  # type: ignore[attr-defined]
    assert again.json() == {  # type: ignore[attr-defined]
        "detail": "web_search has no silence in force; nothing was changed."
    }
    assert OperatorAction.objects.filter(action="unsilence").count() == 1


def test_the_api_refuses_agents_and_unknown_tools(client: Client) -> None:
    agent = AgentToken.issue(name="agents")[1]
    operator = AgentToken.issue(name="ops-bot", is_operator=True)[1]
    tool = make_tool("web_search", state="open")
    silence_of(tool)
    assert unsilence(client, "web_search", agent).status_code in (401, 403)  # type: ignore[attr-defined]
    missing = unsilence(client, "no_such_tool", operator)
    assert missing.status_code == 404  # type: ignore[attr-defined]
    assert ToolSilence.objects.get().ended_at is None


@pytest.mark.parametrize(
    "name",
    ["web_search%00", "web%00search", "a" * 5000, "%F0%9F%92%A9", "..%2F..%2Fweb_search", "%FF%FE"],
)
def test_the_api_answers_hostile_tool_names_without_a_server_error(
    client: Client, name: str
) -> None:
    operator = AgentToken.issue(name="ops-bot", is_operator=True)[1]
    silence_of(make_tool("web_search", state="open"))
    response = unsilence(client, name, operator)
    assert response.status_code in (400, 404), response.content  # type: ignore[attr-defined]
    assert ToolSilence.objects.get().ended_at is None
    assert not OperatorAction.objects.exists()


@pytest.mark.parametrize("value", ["\x00", "1\x00", "\u0661", "-1", " 1", "9" * 18, "1e3", "0x1"])
def test_the_page_answers_hostile_silence_ids_without_a_server_error(
    operator_client: Client, value: str
) -> None:
    tool = make_tool("web_search", state="open")
    silence_of(tool)
    response = end(operator_client, tool, value)
    assert response.status_code == 200  # type: ignore[attr-defined]
    text = response.content.decode()  # type: ignore[attr-defined]
    assert "nothing was changed" in text or "has no silence in force" in text
    assert ToolSilence.objects.get().ended_at is None
    assert not OperatorAction.objects.exists()


def test_an_out_of_range_tool_id_is_not_found(operator_client: Client) -> None:
    silence_of(make_tool("web_search", state="open"))
    for pk in (2**63, 10**30):
        response = operator_client.post(f"/tools/{pk}/unsilence/", {"silence": "1"})
        assert response.status_code == 404
    assert ToolSilence.objects.get().ended_at is None


def test_the_board_marks_a_silenced_tool_small_with_details_in_its_title(
    viewer_client: Client,
) -> None:
    tool = make_tool("web_search", state="open")
    until = timezone.now().replace(second=0, microsecond=0) + timedelta(hours=2)
    silence_of(tool, until=until, set_by=f"@{HOSTILE_SCRIPT} via Slack")
    html = viewer_client.get("/").content.decode()
    marker = html[
        html.index("data-silenced") : html.index("</span></td>", html.index("data-silenced"))
    ]
    assert "silenced until <time" in marker and f"{until:%H:%M} UTC</time>" in marker
    assert f'title="alerts silenced until {until:%Y-%m-%d %H:%M}' in marker
    assert HOSTILE_SCRIPT not in html and "&lt;script&gt;" in marker
