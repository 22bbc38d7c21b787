"""Acting from the Slack alert: signed presses through the stand-in change the fleet, the audit
log and the incident's one message; every refused press changes nothing and says why."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from breakers.models import (
    Incident,
    OperatorAction,
    Tool,
)
from breakers.transports.slack_cards import COLORS, Phase
from scripts.slack_standin import Message, SlackStandIn
from tests.alerts.steps import open_tool
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
