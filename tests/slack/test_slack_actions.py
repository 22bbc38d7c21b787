"""Acting from the Slack alert: signed presses through the stand-in change the fleet, the audit
log and the incident's one message; every refused press changes nothing and says why."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from breakers.models import (
    FleetTransition,
    Incident,
    OperatorAction,
    SlackAction,
    SlackUser,
    Tool,
    ToolSilence,
)
from breakers.transports.slack_cards import COLORS, Phase
from scripts.slack_standin import Message, SlackStandIn, sign
from tests.alerts.steps import open_tool
from tests.slack.support import SECRET
from tests.waiting import wait_for

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]


def the_card(standin: SlackStandIn) -> Message:
    wait_for(lambda: len(standin.bot_messages()) == 1, "the incident's message in #agent-tools")
    [message] = standin.bot_messages()
    return message


def color(message: Message) -> str:
    return str(message.payload["attachments"][0]["color"])


def buttons(message: Message) -> list[str]:
    blocks = message.payload["attachments"][0]["blocks"]
    [actions] = [b for b in blocks if b["type"] == "actions"]
    return [e["action_id"] for e in actions["elements"]]


def card_text(message: Message) -> str:
    parts: list[str] = []
    for block in message.payload["attachments"][0]["blocks"]:
        for item in [block.get("text"), *(block.get("fields") or [])]:
            if isinstance(item, dict):
                parts.append(str(item.get("text")))
    return "\n".join(parts)


def wait_edited(standin: SlackStandIn, ts: str, edits: int, what: str) -> Message:
    wait_for(lambda: (m := standin.message(ts)) is not None and m.edits >= edits, what)
    message = standin.message(ts)
    assert message is not None
    return message


def opened_incident() -> Incident:
    open_tool("web_search", timezone.now())
    return Incident.objects.get(tool__name="web_search", closed_at__isnull=True)


def test_force_close_from_slack_changes_the_fleet_the_audit_log_and_the_message(
    bot: SlackStandIn, operator: User
) -> None:
    incident = opened_incident()
    card = the_card(bot)
    assert color(card) == COLORS[Phase.OPEN]
    assert buttons(card) == [
        "bp_acknowledge", "bp_force_open", "bp_force_close", "bp_silence", "bp_open_dashboard"
    ]  # fmt: skip
    status, _, view_id = bot.press(
        ts=card.ts, action_id="bp_force_close", value=str(incident.pk), user_id="U0OPERATOR"
    )
    assert status == 200 and view_id is not None, "the reason modal opens inside the request"
    status, answer = bot.submit(view_id, {"reason": "vendor says it is fixed"})
    assert (status, answer) == (200, None)

    wait_for(lambda: Tool.objects.get(name="web_search").state == "forced_closed", "forced closed")
    action = OperatorAction.objects.get(action="force_close")
    assert (action.actor, action.via, action.reason) == (
        "user:oncall-op", "Slack (@operator)", "vendor says it is fixed"
    )  # fmt: skip
    assert action.user == operator
    card = wait_edited(bot, card.ts, 1, "the message updated in place")
    wait_for(lambda: color(bot.message(card.ts)) == COLORS[Phase.FORCED], "the forced colour")  # type: ignore[arg-type]
    card = bot.message(card.ts)  # type: ignore[assignment]
    assert "Forced closed* by @operator via Slack: vendor says it is fixed" in card_text(card)
    assert "bp_release" in buttons(card)
    assert len(bot.bot_messages()) == 1, "one message per incident"


def text_of(html: str) -> str:
    """A page's text, tags dropped and spaces folded."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split()).replace(" :", ":")


def post_signed(
    client: Client,
    body: bytes,
    *,
    timestamp: str | None = None,
    secret: str = SECRET,
    signature: str | None = None,
) -> Any:
    stamp = timestamp if timestamp is not None else str(int(time.time()))
    return client.post(
        "/slack/actions",
        data=body,
        content_type="application/x-www-form-urlencoded",
        headers={
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature or sign(secret, stamp, body),
        },
    )


def form(payload: dict[str, Any]) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


def nothing_changed(tool: str = "web_search", state: str = "open") -> None:
    assert Tool.objects.get(name=tool).state == state
    assert not SlackAction.objects.exists()
    assert not OperatorAction.objects.exists()


def test_acknowledge_by_any_linked_user_turns_the_message_amber_and_is_audited(
    bot: SlackStandIn, viewer: User, client: Client
) -> None:
    incident = opened_incident()
    card = the_card(bot)
    status, _, view_id = bot.press(
        ts=card.ts, action_id="bp_acknowledge", value=str(incident.pk), user_id="U0VIEWER01"
    )
    assert (status, view_id) == (200, None)
    wait_for(
        lambda: color(bot.message(card.ts)) == COLORS[Phase.ACKNOWLEDGED],  # type: ignore[arg-type]
        "the amber acknowledged message",
    )
    card = bot.message(card.ts)  # type: ignore[assignment]
    assert "*Acknowledged* by @viewer via Slack" in card_text(card)
    assert "bp_acknowledge" not in buttons(card)
    row = OperatorAction.objects.get(action="acknowledge")
    assert (row.actor, row.via, row.user) == ("user:watcher", "Slack (@viewer)", viewer)
    assert Tool.objects.get(name="web_search").state == "open", "acknowledging changes no state"
    client.force_login(viewer)
    timeline = text_of(client.get(f"/incidents/{incident.pk}/").content.decode())
    assert "Acknowledge by user:watcher via Slack (@viewer)" in timeline
    audit = text_of(client.get("/audit/?action=acknowledge").content.decode())
    assert "user:watcher via Slack (@viewer)" in audit


def test_a_linked_user_without_operator_permission_cannot_force_and_is_told_why(
    bot: SlackStandIn, viewer: User
) -> None:
    incident = opened_incident()
    card = the_card(bot)
    status, _, view_id = bot.press(
        ts=card.ts, action_id="bp_force_open", value=str(incident.pk), user_id="U0VIEWER01"
    )
    assert (status, view_id) == (200, None), "no reason modal for someone who may not act"
    wait_for(lambda: bot.ephemerals_for("U0VIEWER01"), "the answer only the presser sees")
    [answer] = bot.ephemerals_for("U0VIEWER01")
    assert "Not allowed" in answer and "operator permission" in answer and "watcher" in answer
    assert not any(method == "views.open" for method, _ in bot.calls)
    nothing_changed()
    assert bot.message(card.ts).edits == 0  # type: ignore[union-attr]


def test_an_unlinked_user_is_refused_and_offered_a_link_never_linked_by_email(
    bot: SlackStandIn, viewer: User
) -> None:
    User.objects.create_user("strange", email="nobody@example.com")
    incident = opened_incident()
    card = the_card(bot)
    bot.press(ts=card.ts, action_id="bp_acknowledge", value=str(incident.pk), user_id="U0STRANGER")
    wait_for(lambda: bot.ephemerals_for("U0STRANGER"), "the answer to the unlinked user")
    [answer] = bot.ephemerals_for("U0STRANGER")
    assert "Not allowed: your Slack account is not linked" in answer
    assert "/slack/link/?t=" in answer
    nothing_changed()


def test_an_email_match_only_suggests_a_link(bot: SlackStandIn, operator: User) -> None:
    """The stand-in's @viewer has viewer@example.com; so has a dashboard user: a hint only."""
    User.objects.create_user("vee", email="Viewer@Example.com")
    incident = opened_incident()
    card = the_card(bot)
    SlackUser.objects.filter(slack_user_id="U0VIEWER01").delete()
    bot.press(ts=card.ts, action_id="bp_acknowledge", value=str(incident.pk), user_id="U0VIEWER01")
    wait_for(lambda: bot.ephemerals_for("U0VIEWER01"), "the answer")
    [answer] = bot.ephemerals_for("U0VIEWER01")
    assert "matches the dashboard user *vee*" in answer
    assert not SlackUser.objects.filter(slack_user_id="U0VIEWER01").exists()
    nothing_changed()


def test_silence_holds_repeat_alerts_and_the_board_shows_who_set_it(
    bot: SlackStandIn, operator: User, client: Client
) -> None:
    incident = opened_incident()
    card = the_card(bot)
    before = timezone.now()
    bot.press(
        ts=card.ts,
        action_id="bp_silence",
        value="",
        user_id="U0OPERATOR",
        option=f"{incident.pk}:2h",
    )
    wait_for(lambda: ToolSilence.objects.exists(), "the silence")
    silence = ToolSilence.objects.get()
    assert silence.until is not None
    assert 7190 <= (silence.until - before).total_seconds() <= 7300
    assert silence.set_by == "@operator via Slack"
    wait_for(
        lambda: color(bot.message(card.ts)) == COLORS[Phase.SILENCED],  # type: ignore[arg-type]
        "the grey silenced message",
    )
    assert "*Silenced* until" in card_text(bot.message(card.ts))  # type: ignore[arg-type]
    client.force_login(operator)
    board = client.get("/").content.decode()
    assert "alerts silenced until" in board and "@operator via Slack" in board
    assert OperatorAction.objects.get(action="silence").reason == "silenced for 2 hours"


def test_release_is_offered_only_while_forced_and_puts_the_tool_back(
    bot: SlackStandIn, operator: User
) -> None:
    incident = opened_incident()
    card = the_card(bot)
    assert "bp_release" not in buttons(card)
    _, _, view_id = bot.press(
        ts=card.ts, action_id="bp_force_open", value=str(incident.pk), user_id="U0OPERATOR"
    )
    assert view_id is not None
    bot.submit(view_id, {"reason": "kill switch while we look"})
    wait_for(lambda: Tool.objects.get(name="web_search").state == "forced_open", "forced open")
    wait_for(lambda: "bp_release" in buttons(bot.message(card.ts)), "the Release button")  # type: ignore[arg-type]
    bot.press(ts=card.ts, action_id="bp_release", value=str(incident.pk), user_id="U0OPERATOR")
    wait_for(lambda: Tool.objects.get(name="web_search").state == "open", "released")
    release = OperatorAction.objects.get(action="release")
    assert release.via == "Slack (@operator)" and release.reason == "released from Slack"


def test_a_force_without_a_reason_is_answered_in_the_modal(
    bot: SlackStandIn, operator: User
) -> None:
    incident = opened_incident()
    card = the_card(bot)
    _, _, view_id = bot.press(
        ts=card.ts, action_id="bp_force_close", value=str(incident.pk), user_id="U0OPERATOR"
    )
    assert view_id is not None
    status, answer = bot.submit(view_id, {"reason": "   "})
    assert status == 200
    assert answer == {
        "response_action": "errors",
        "errors": {"reason": "A reason is required: say why, it is shown to everyone."},
    }
    nothing_changed()


# -- refused before anything is read ------------------------------------------------------------


def test_a_bad_signature_changes_nothing_and_says_why(bot: SlackStandIn, operator: User) -> None:
    incident = opened_incident()
    card = the_card(bot)
    payload = bot.block_action_payload(
        ts=card.ts, action_id="bp_acknowledge", value=str(incident.pk), user_id="U0OPERATOR"
    )
    response = post_signed(Client(), form(payload), secret="not-the-signing-secret")
    assert response.status_code == 401
    assert "signature does not match" in response.content.decode()
    nothing_changed()


def test_an_old_timestamp_changes_nothing_and_says_why(bot: SlackStandIn, operator: User) -> None:
    incident = opened_incident()
    card = the_card(bot)
    payload = bot.block_action_payload(
        ts=card.ts, action_id="bp_acknowledge", value=str(incident.pk), user_id="U0OPERATOR"
    )
    old = str(int(time.time()) - 6 * 60)  # signed correctly, six minutes ago
    response = post_signed(Client(), form(payload), timestamp=old)
    assert response.status_code == 401
    assert "more than 5 minutes" in response.content.decode()
    nothing_changed()


def test_a_replayed_request_is_refused(bot: SlackStandIn, operator: User) -> None:
    incident = opened_incident()
    card = the_card(bot)
    payload = bot.block_action_payload(
        ts=card.ts, action_id="bp_acknowledge", value=str(incident.pk), user_id="U0OPERATOR"
    )
    body, stamp = form(payload), str(int(time.time()))
    assert post_signed(Client(), body, timestamp=stamp).status_code == 200
    again = post_signed(Client(), body, timestamp=stamp)
    assert again.status_code == 401
    assert "already received (a replay)" in again.content.decode()
    assert SlackAction.objects.count() == 1
    wait_for(lambda: OperatorAction.objects.filter(action="acknowledge").count() == 1, "one ack")


def test_a_malformed_timestamp_is_a_400(bot: SlackStandIn, operator: User) -> None:
    body = form({"type": "block_actions"})
    response = post_signed(Client(), body, timestamp="12ab", signature="v0=00")
    assert response.status_code == 400
    assert "not a Unix time" in response.content.decode()


def test_without_a_signing_secret_nothing_is_accepted(
    bot: SlackStandIn, operator: User, settings: Any
) -> None:
    settings.SLACK_SIGNING_SECRET = ""
    response = post_signed(Client(), form({"type": "block_actions"}))
    assert response.status_code == 503
    assert "SLACK_SIGNING_SECRET is not set" in response.content.decode()


# -- signed, but not something we can do --------------------------------------------------------


def test_a_payload_that_is_not_json_is_a_clear_400(bot: SlackStandIn, operator: User) -> None:
    for body in (b"payload=%7Bnot+json", b"nothing=here", b"payload=%5B1%5D"):
        response = post_signed(Client(), body)
        assert response.status_code == 400, body
        assert "JSON" in response.content.decode()
    not_text = post_signed(Client(), b"payload=\xff\xfe")
    assert not_text.status_code == 400
    assert "malformed" in not_text.content.decode()
    assert not SlackAction.objects.exists()


@pytest.mark.parametrize(
    ("action_id", "value", "expected"),
    [
        ("bp_delete_everything", "{incident}", "Unknown action 'bp_delete_everything'"),
        ("bp_acknowledge", "not-a-number", "does not name an incident"),
        ("bp_acknowledge", "999999", "no longer exists"),
    ],
)
def test_bad_presses_get_a_clear_ephemeral_answer(
    bot: SlackStandIn, operator: User, action_id: str, value: str, expected: str
) -> None:
    incident = opened_incident()
    card = the_card(bot)
    status, _, _ = bot.press(
        ts=card.ts,
        action_id=action_id,
        value=value.format(incident=incident.pk),
        user_id="U0OPERATOR",
    )
    assert status == 200
    wait_for(lambda: bot.ephemerals_for("U0OPERATOR"), "the ephemeral answer")
    assert expected in bot.ephemerals_for("U0OPERATOR")[0]
    nothing_changed()


def test_a_tool_that_no_longer_exists_gets_a_clear_answer(
    bot: SlackStandIn, operator: User
) -> None:
    incident = opened_incident()
    card = the_card(bot)
    # Gone as a whole (the database keeps no tool without its history): incident, rows, tool.
    Incident.objects.filter(tool_id=incident.tool_id).delete()
    FleetTransition.objects.filter(tool_id=incident.tool_id).delete()
    Tool.objects.filter(pk=incident.tool_id).delete()
    bot.press(ts=card.ts, action_id="bp_force_close", value=str(incident.pk), user_id="U0OPERATOR")
    wait_for(lambda: bot.ephemerals_for("U0OPERATOR"), "the ephemeral answer")
    assert "no longer exists" in bot.ephemerals_for("U0OPERATOR")[0]
    assert not SlackAction.objects.exists()


def test_an_incident_already_resolved_gets_a_clear_answer(
    bot: SlackStandIn, operator: User
) -> None:
    incident = opened_incident()
    card = the_card(bot)
    Incident.objects.filter(pk=incident.pk).update(closed_at=timezone.now())
    Tool.objects.filter(pk=incident.tool_id).update(state="closed", forced="")
    bot.press(ts=card.ts, action_id="bp_force_open", value=str(incident.pk), user_id="U0OPERATOR")
    wait_for(lambda: bot.ephemerals_for("U0OPERATOR"), "the ephemeral answer")
    assert "already resolved" in bot.ephemerals_for("U0OPERATOR")[0]
    assert not SlackAction.objects.exists()
    assert not OperatorAction.objects.exists()


def test_a_lost_card_sync_is_queued_again_by_the_sweep(
    bot: SlackStandIn, operator: User, settings: Any
) -> None:
    from breakers.slack.sync import cards_to_resync
    from breakers.tasks import slack_sweep_cards

    settings.SLACK_BOT_TOKEN = ""  # bot mode off here: the opening queues no card
    incident = opened_incident()
    settings.SLACK_BOT_TOKEN = "xoxb-breaker-panel-tests"
    assert cards_to_resync() == [], "too recent: its sync may still be on its way"
    Incident.objects.filter(pk=incident.pk).update(opened_at=timezone.now() - timedelta(seconds=60))
    assert cards_to_resync() == [incident.pk]
    assert slack_sweep_cards() == 1
    card = the_card(bot)
    assert color(card) == COLORS[Phase.OPEN]
    wait_for(lambda: cards_to_resync() == [], "the posted card's row to be committed")


def test_an_incident_that_outlasts_its_tools_silence_gets_its_card(
    bot: SlackStandIn, operator: User, settings: Any
) -> None:
    from breakers.slack.sync import cards_to_resync, sync_incident_message
    from breakers.tasks import slack_sweep_cards

    silence = ToolSilence.objects.create(
        tool=Tool.objects.get_or_create(name="web_search")[0],
        until=timezone.now() + timedelta(minutes=30),
        set_by="@ana via Slack",
    )
    settings.SLACK_BOT_TOKEN = ""  # the opening's own sync is driven below, not queued
    incident = opened_incident()
    settings.SLACK_BOT_TOKEN = "xoxb-breaker-panel-tests"
    assert sync_incident_message(incident_id=incident.pk).outcome == "silenced"
    Incident.objects.filter(pk=incident.pk).update(opened_at=timezone.now() - timedelta(seconds=60))
    assert cards_to_resync() == [], "silenced: held back"
    ToolSilence.objects.filter(pk=silence.pk).update(until=timezone.now() - timedelta(seconds=1))
    assert cards_to_resync() == [incident.pk]  # the silence is over, the incident is not
    assert slack_sweep_cards() == 1
    card = the_card(bot)
    assert color(card) == COLORS[Phase.OPEN]
    wait_for(lambda: cards_to_resync() == [], "the posted card's row to be committed")


@pytest.mark.parametrize("user_id", ["U0\x00OPERATOR", "U\nOPERATOR", "U" * 33])
def test_a_user_id_that_is_not_slacks_is_a_400_not_a_database_error(
    bot: SlackStandIn, operator: User, user_id: str
) -> None:
    # A NUL byte reached PostgreSQL (which refuses it) through the link look-up: a 500.
    incident = opened_incident()
    the_card(bot)
    press = {
        "type": "block_actions",
        "user": {"id": user_id, "team_id": "T0BREAKERS", "username": "operator"},
        "actions": [{"action_id": "bp_acknowledge", "value": str(incident.pk)}],
    }
    response = post_signed(Client(), form(press))
    assert response.status_code == 400
    assert "who pressed" in response.content.decode()
    assert not SlackAction.objects.exists()


# -- one card update per press, ending a silence -------------------------------------------------


def card_updates(standin: SlackStandIn) -> int:
    return sum(1 for method, _ in standin.calls if method == "chat.update")


@pytest.mark.parametrize("action_id", ["bp_force_close", "bp_force_open"])
def test_a_force_from_slack_updates_its_card_once(
    bot: SlackStandIn, operator: User, slack_worker: Any, action_id: str
) -> None:
    # The press's task and the fleet's own card sync both rewrote it: two chat.update calls.
    incident = opened_incident()
    card = the_card(bot)
    slack_worker.wait_idle()
    assert card_updates(bot) == 0
    _, _, view_id = bot.press(
        ts=card.ts, action_id=action_id, value=str(incident.pk), user_id="U0OPERATOR"
    )
    assert view_id is not None
    bot.submit(view_id, {"reason": "vendor incident INC-1"})
    wait_for(lambda: Tool.objects.get(name="web_search").forced != "", "forced")
    wait_edited(bot, card.ts, 1, "the message updated in place")
    slack_worker.wait_idle()
    assert card_updates(bot) == 1
    assert color(bot.message(card.ts)) == COLORS[Phase.FORCED]  # type: ignore[arg-type]


def test_a_silence_ends_early_from_its_card_once_and_audited(
    bot: SlackStandIn, operator: User, slack_worker: Any
) -> None:
    incident = opened_incident()
    card = the_card(bot)
    bot.press(
        ts=card.ts, action_id="bp_silence", value="", user_id="U0OPERATOR",
        option=f"{incident.pk}:recovery",
    )  # fmt: skip
    wait_for(
        lambda: "bp_unsilence" in buttons(bot.message(card.ts)),  # type: ignore[arg-type]
        "the End silence button on the silenced card",
    )
    slack_worker.wait_idle()
    before = card_updates(bot)
    bot.press(ts=card.ts, action_id="bp_unsilence", value=str(incident.pk), user_id="U0OPERATOR")
    wait_for(lambda: color(bot.message(card.ts)) == COLORS[Phase.OPEN], "the red card again")  # type: ignore[arg-type]
    slack_worker.wait_idle()
    assert card_updates(bot) == before + 1
    card = bot.message(card.ts)  # type: ignore[assignment]
    assert "bp_unsilence" not in buttons(card) and "bp_silence" in buttons(card)
    silence = ToolSilence.objects.get()
    assert silence.ended_at is not None
    assert (silence.ended_by, silence.ended_via) == ("@operator via Slack", "Slack (@operator)")
    row = OperatorAction.objects.get(action="unsilence")
    assert (row.actor, row.via, row.user) == ("user:oncall-op", "Slack (@operator)", operator)
    assert "@operator via Slack (until recovery)" in row.reason

    # The same press again (an old copy of the card): told, nothing changes, no 500.
    status, _, _ = bot.press(
        ts=card.ts, action_id="bp_unsilence", value=str(incident.pk), user_id="U0OPERATOR"
    )
    assert status == 200
    wait_for(lambda: bot.ephemerals_for("U0OPERATOR"), "the answer to the second press")
    assert "is not silenced" in bot.ephemerals_for("U0OPERATOR")[-1]
    assert OperatorAction.objects.filter(action="unsilence").count() == 1


def test_ending_a_silence_from_slack_needs_the_operator_permission(
    bot: SlackStandIn, operator: User, viewer: User
) -> None:
    incident = opened_incident()
    card = the_card(bot)
    bot.press(
        ts=card.ts, action_id="bp_silence", value="", user_id="U0OPERATOR",
        option=f"{incident.pk}:2h",
    )  # fmt: skip
    wait_for(lambda: ToolSilence.objects.exists(), "the silence")
    bot.press(ts=card.ts, action_id="bp_unsilence", value=str(incident.pk), user_id="U0VIEWER01")
    wait_for(lambda: bot.ephemerals_for("U0VIEWER01"), "the refusal")
    assert "ending a silence need the operator permission" in bot.ephemerals_for("U0VIEWER01")[0]
    assert ToolSilence.objects.get().ended_at is None
