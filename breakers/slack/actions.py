"""What a verified press in Slack asks for, and whether its user may have it.

``handle_interaction`` runs inside ``POST /slack/actions`` and stays fast: it reads the payload,
finds the linked dashboard user, checks the permission, opens the reason modal (``views.open``
needs the press's trigger_id, valid once for 3 s) and records an accepted action as a
``SlackAction`` row; Celery does the rest once the row is committed (``perform_slack_action``).
Anything refused is answered to that user alone (an ephemeral message through ``response_url``)
and changes nothing. Why: docs/adr/0196-slack-presses-verified-answered-fast-done-in-celery.md.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import parse_qs

import redis
from celery import current_app
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from breakers.access.operators import is_operator
from breakers.alerts.creation import action_card_incident
from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import (
    MAX_REASON_CHARS,
    FleetError,
    fleet_operator_action,
)
from breakers.models import (
    ACKNOWLEDGE,
    SILENCE,
    UNSILENCE,
    Incident,
    OperatorAction,
    SlackAction,
    SlackActionState,
    SlackIncidentMessage,
    SlackUser,
    ToolSilence,
)
from breakers.slack.cards import incident_card
from breakers.slack.silences import end_silence
from breakers.transports import TransportError
from breakers.transports.slack import validate_webhook_url
from breakers.transports.slack_bot import TRIGGER_GONE, SlackBot
from breakers.transports.slack_cards import (
    ACTION_ACKNOWLEDGE,
    ACTION_DASHBOARD,
    ACTION_FORCE_CLOSE,
    ACTION_FORCE_OPEN,
    ACTION_RELEASE,
    ACTION_SILENCE,
    ACTION_UNSILENCE,
    SILENCE_OPTIONS,
)

__all__ = (
    "MODAL_CALLBACK",
    "PERFORM_TASK",
    "RESPOND_TASK",
    "Reply",
    "handle_interaction",
    "perform_slack_action",
)

logger = logging.getLogger(__name__)

MODAL_CALLBACK = "bp_force_reason"
PERFORM_TASK = "breakers.slack_perform_action"
RESPOND_TASK = "breakers.slack_respond"
# views.open must answer well inside Slack's 3 s for the whole request.
MODAL_TIMEOUT_SECONDS = 2.0

_FORCE = {
    ACTION_FORCE_OPEN: (OperatorActionKind.FORCE_OPEN, "Force open"),
    ACTION_FORCE_CLOSE: (OperatorActionKind.FORCE_CLOSE, "Force close"),
}
_KINDS = {
    ACTION_ACKNOWLEDGE: ACKNOWLEDGE,
    ACTION_RELEASE: OperatorActionKind.RELEASE.value,
    ACTION_SILENCE: SILENCE,
    ACTION_UNSILENCE: UNSILENCE,
    ACTION_FORCE_OPEN: OperatorActionKind.FORCE_OPEN.value,
    ACTION_FORCE_CLOSE: OperatorActionKind.FORCE_CLOSE.value,
}
_OPERATOR_ONLY = (
    "force open, force close, release, silence and ending a silence need the operator permission"
)
# Done by the fleet: its audit row queues the card's sync (breakers.alerts.creation).
_FLEET_KINDS = frozenset(
    kind.value
    for kind in (
        OperatorActionKind.FORCE_OPEN,
        OperatorActionKind.FORCE_CLOSE,
        OperatorActionKind.RELEASE,
    )
)


@dataclass(frozen=True)
class Reply:
    """The HTTP answer to Slack: ``body`` JSON (a modal's errors), or empty."""

    status: int = 200
    body: dict[str, Any] | None = None
    text: str = ""


@dataclass
class _Press:
    """What every interaction carries: who, and where to answer them alone."""

    team_id: str
    user_id: str
    name: str
    response_url: str = ""
    notes: list[str] = field(default_factory=list)


class Refused(Exception):
    """A press we answer with an ephemeral message, changing nothing."""


def send_slack_task(name: str, *args: Any) -> None:
    """Queue one of Slack's tasks by name (breakers.tasks sits above), on SLACK_TASK_QUEUE."""
    current_app.send_task(name, args=args, queue=settings.SLACK_TASK_QUEUE or None)


# -- entry point --------------------------------------------------------------------------------


def handle_interaction(*, body: bytes, bot: SlackBot | None = None) -> Reply:
    """Answer one verified interaction request (form body ``payload=<json>``)."""
    try:
        fields = parse_qs(body.decode("utf-8"), max_num_fields=10)
        payload = json.loads(fields["payload"][0])
    except (UnicodeDecodeError, KeyError, IndexError, ValueError):
        return Reply(400, text="the request has no JSON payload field")
    if not isinstance(payload, dict):
        return Reply(400, text="the payload is not a JSON object")
    press = _press(payload)
    if press is None:
        return Reply(400, text="the payload does not say who pressed (user and team)")
    kind = payload.get("type")
    try:
        if kind == "block_actions":
            return _block_action(payload, press, bot)
        if kind == "view_submission":
            return _view_submission(payload, press)
    except Refused as exc:
        if kind == "view_submission":
            return Reply(body={"response_action": "errors", "errors": {"reason": str(exc)}})
        _respond_later(press, str(exc))
        return Reply()
    return Reply(400, text=f"unsupported interaction type {str(kind)[:40]!r}")


def _press(payload: dict[str, Any]) -> _Press | None:
    user = payload.get("user")
    team = payload.get("team")
    if not isinstance(user, dict):
        return None
    user_id = str(user.get("id") or "")
    team_id = str(user.get("team_id") or (team.get("id") if isinstance(team, dict) else "") or "")
    if not (_slack_id(user_id) and _slack_id(team_id)):
        return None
    name = str(user.get("username") or user.get("name") or user_id)[:80].replace("\x00", "")
    response_url = str(payload.get("response_url") or "")
    return _Press(
        team_id=team_id, user_id=user_id, name=name, response_url=_checked_url(response_url)
    )


def _slack_id(value: str) -> bool:
    """Slack's user and team ids are short and printable (``U0123ABCD``); anything else is not
    one (and a NUL byte would reach PostgreSQL, which refuses it)."""
    return 0 < len(value) <= 32 and value.isprintable()


def _checked_url(url: str) -> str:
    if not url:
        return ""
    try:
        return validate_webhook_url(url)
    except ValueError:
        return ""


# -- presses ------------------------------------------------------------------------------------


def _block_action(payload: dict[str, Any], press: _Press, bot: SlackBot | None) -> Reply:
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        raise Refused("That press carried no action; nothing was changed.")
    action = actions[0]
    action_id = str(action.get("action_id") or "")
    if action_id == ACTION_DASHBOARD:
        return Reply()  # a link: Slack opened it in the browser, nothing to do here
    if action_id not in _KINDS:
        raise Refused(f"Unknown action {action_id[:60]!r}; nothing was changed.")
    option = ""
    if action_id == ACTION_SILENCE:
        selected = action.get("selected_option")
        raw = str(selected.get("value") or "") if isinstance(selected, dict) else ""
        value, _, option = raw.partition(":")
        if option not in SILENCE_OPTIONS:
            raise Refused("Pick how long to silence for (30 min, 2 h, 8 h or until recovery).")
    else:
        value = str(action.get("value") or "")
    incident = _incident(value)
    link = _allowed(press, action_id, incident)
    if action_id in _FORCE:
        _open_reason_modal(payload, press, incident, action_id, bot)
        return Reply()
    _accept(press, link, incident, action_id, option=option, reason="")
    return Reply()


def _view_submission(payload: dict[str, Any], press: _Press) -> Reply:
    view = payload.get("view")
    if not isinstance(view, dict) or view.get("callback_id") != MODAL_CALLBACK:
        return Reply(400, text="unknown view")
    try:
        meta = json.loads(str(view.get("private_metadata") or ""))
        action_id = str(meta["action"])
        incident_value = str(meta["incident"])
        press.response_url = _checked_url(str(meta.get("response_url") or ""))
    except (ValueError, KeyError, TypeError):
        raise Refused("This dialog is damaged; close it and press the button again.") from None
    if action_id not in _FORCE:
        raise Refused("Unknown action; nothing was changed.")
    reason = _reason(view)
    if not reason:
        raise Refused("A reason is required: say why, it is shown to everyone.")
    if len(reason) > MAX_REASON_CHARS or "\x00" in reason:
        raise Refused(f"The reason must be at most {MAX_REASON_CHARS} characters of text.")
    incident = _incident(incident_value)
    link = _allowed(press, action_id, incident)
    _accept(press, link, incident, action_id, option="", reason=reason)
    return Reply()


def _reason(view: dict[str, Any]) -> str:
    values = ((view.get("state") or {}).get("values") or {}) if isinstance(view, dict) else {}
    block = values.get("reason") if isinstance(values, dict) else None
    element = block.get("reason") if isinstance(block, dict) else None
    value = element.get("value") if isinstance(element, dict) else None
    return str(value or "").strip()


def _incident(value: str) -> Incident:
    if not (value.isascii() and value.isdigit() and len(value) <= 18):
        raise Refused("That button does not name an incident; nothing was changed.")
    incident = Incident.objects.select_related("tool", "opened_by").filter(pk=int(value)).first()
    if incident is None:
        raise Refused(
            "This incident or its tool no longer exists in Breaker Panel; nothing was changed."
        )
    return incident


def _allowed(press: _Press, action_id: str, incident: Incident) -> SlackUser:
    """The press's link when its user may do ``action_id`` on ``incident`` now; else Refused."""
    link = (
        SlackUser.objects.select_related("user")
        .filter(team_id=press.team_id, slack_user_id=press.user_id)
        .first()
    )
    if link is None or not link.user.is_active:
        press.notes.append("unlinked")
        raise Refused(
            "Not allowed: your Slack account is not linked to a Breaker Panel user, so nothing "
            "was changed. Link it from the dashboard (or ask an admin to)."
        )
    if action_id != ACTION_ACKNOWLEDGE and not is_operator(link.user):
        raise Refused(
            f"Not allowed: {_OPERATOR_ONLY}, and {link.user.get_username()} does not have it. "
            "Nothing was changed."
        )
    card = incident_card(incident, light=True)
    if not card.live:
        when = f" at {card.closed_at:%Y-%m-%d %H:%M UTC}" if card.closed_at else ""
        raise Refused(
            f"This incident on {incident.tool.name} is already resolved (recovered{when}); "
            "nothing was changed. Use the dashboard for anything else."
        )
    if action_id == ACTION_ACKNOWLEDGE:
        if card.closed_at is not None:
            raise Refused("This incident is over; there is nothing to acknowledge.")
        if card.acknowledged_by:
            raise Refused(f"Already acknowledged by {card.acknowledged_by}; nothing was changed.")
    if action_id == ACTION_RELEASE and not card.forced:
        raise Refused(f"{incident.tool.name} is not forced: there is nothing to release.")
    if action_id == ACTION_UNSILENCE and not card.silenced:
        raise Refused(
            f"{incident.tool.name} is not silenced (the silence has ended): nothing was changed."
        )
    return link


def _open_reason_modal(
    payload: dict[str, Any],
    press: _Press,
    incident: Incident,
    action_id: str,
    bot: SlackBot | None,
) -> None:
    trigger_id = str(payload.get("trigger_id") or "")
    if not trigger_id:
        raise Refused("Slack sent no trigger to open the reason dialog; press the button again.")
    _, label = _FORCE[action_id]
    meta = {"incident": incident.pk, "action": action_id, "response_url": press.response_url}
    tool = incident.tool.name[:100].replace("`", "'")
    view = {
        "type": "modal",
        "callback_id": MODAL_CALLBACK,
        "title": {"type": "plain_text", "text": label},
        "submit": {"type": "plain_text", "text": label},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": json.dumps(meta),
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "plain_text",
                    "text": f"{label} {tool} for every agent run in the fleet, until released.",
                },
            },
            {
                "type": "input",
                "block_id": "reason",
                "label": {"type": "plain_text", "text": "Reason"},
                "hint": {
                    "type": "plain_text",
                    "text": "Required. Shown on the board, in the audit log and in Slack.",
                },
                "element": {
                    "type": "plain_text_input",
                    "action_id": "reason",
                    "multiline": True,
                    "max_length": MAX_REASON_CHARS,
                },
            },
        ],
    }
    try:
        (bot or SlackBot.from_settings(timeout=MODAL_TIMEOUT_SECONDS)).open_view(trigger_id, view)
    except TransportError as exc:
        if exc.code in TRIGGER_GONE:
            raise Refused("The press expired before the dialog opened; press it again.") from None
        raise Refused(
            f"Could not open the reason dialog ({exc.code or exc.message}); nothing was changed."
        ) from None


def _accept(
    press: _Press, link: SlackUser, incident: Incident, action_id: str, *, option: str, reason: str
) -> SlackAction:
    with transaction.atomic():
        row = SlackAction.objects.create(
            link=link,
            user=link.user,
            incident=incident,
            action=_KINDS[action_id],
            option=option,
            reason=reason,
            via=f"Slack (@{press.name})",
            response_url=press.response_url,
        )
        transaction.on_commit(partial(send_slack_task, PERFORM_TASK, row.pk), robust=True)
    return row


def _respond_later(press: _Press, text: str) -> None:
    if not press.response_url:
        logger.info("Slack press refused without a response_url: %s", text)
        return
    suggest = [press.team_id, press.user_id, press.name] if "unlinked" in press.notes else None
    try:
        send_slack_task(RESPOND_TASK, press.response_url, text, suggest)
    except (redis.RedisError, OSError) as exc:  # the broker is down: the press changed nothing
        logger.warning("could not queue the Slack answer %r: %s", text, exc)


# -- done by Celery -----------------------------------------------------------------------------


def perform_slack_action(*, action_id: int, now: datetime | None = None) -> SlackAction | None:
    """Do an accepted press once (claimed pending -> done); the caller updates the card.

    The fleet may still refuse it (released meanwhile, Redis down): the row says why and the
    user is told.
    """
    now = now or timezone.now()
    claimed = SlackAction.objects.filter(pk=action_id, state=SlackActionState.PENDING).update(
        state=SlackActionState.DONE, done_at=now
    )
    if not claimed:
        return None
    row = SlackAction.objects.select_related("incident__tool", "user").get(pk=action_id)
    try:
        row.result = _perform(row, now)
    except (FleetError, redis.RedisError) as exc:
        row.state = SlackActionState.REFUSED
        row.result = f"Nothing was changed: {exc}" if str(exc) else "Nothing was changed."
        row.save(update_fields=["state", "result"])
        if row.response_url:
            send_slack_task(RESPOND_TASK, row.response_url, row.result, None)
        return row
    row.save(update_fields=["result"])
    return row


def card_synced_by_fleet(row: SlackAction) -> bool:
    """Whether the fleet already queued the sync of this press's card: a force or release it
    did queues the sync of the tool's open (else newest) incident's card with its audit row.
    The press's task updates the card itself otherwise, so each press updates it once."""
    if row.state != SlackActionState.DONE or row.action not in _FLEET_KINDS:
        return False
    latest = action_card_incident(row.incident.tool)
    return latest is not None and latest.pk == row.incident_id


def _perform(row: SlackAction, now: datetime) -> str:
    user = row.user
    if user is None:
        raise FleetError("the linked dashboard user was deleted")
    incident, tool = row.incident, row.incident.tool
    if row.action == UNSILENCE:
        end_silence(tool=tool, user=user, via=row.via, now=now, sync_cards=False)
        return "ended the silence early"
    if row.action in (ACKNOWLEDGE, SILENCE):
        return _note(row, user, incident, now)
    reason = row.reason or "released from Slack"
    action = fleet_operator_action(
        tool_name=tool.name,
        action=OperatorActionKind(row.action),
        reason=reason,
        user=user,
        via=row.via,
    )
    return f"{action.action}: {action.before.get('state')} -> {action.after.get('state')}"


def _note(row: SlackAction, user: User, incident: Incident, now: datetime) -> str:
    """Acknowledge or silence: no fleet state changes, but audited like any action."""
    tool = incident.tool
    who = f"{row.via.removeprefix('Slack (').removesuffix(')')} via Slack"
    state = {"state": tool.state}
    with transaction.atomic():
        if row.action == ACKNOWLEDGE:
            message, _ = SlackIncidentMessage.objects.select_for_update().get_or_create(
                incident=incident
            )
            if message.acknowledged_by:
                raise FleetError(f"already acknowledged by {message.acknowledged_by}")
            message.acknowledged_by, message.acknowledged_at = who, now
            message.save(update_fields=["acknowledged_by", "acknowledged_at"])
            reason = "acknowledged"
        else:
            label, seconds = SILENCE_OPTIONS[row.option]
            until = now + timedelta(seconds=seconds) if seconds is not None else None
            ToolSilence.objects.filter(tool=tool, ended_at__isnull=True).update(
                ended_at=now, ended_by=who, ended_via="replaced by a newer silence"
            )
            ToolSilence.objects.create(
                tool=tool,
                incident=incident,
                until=until,
                set_at=now,
                set_by=who,
                via=row.via,
            )
            reason = f"silenced {label}" if seconds is None else f"silenced for {label}"
        OperatorAction.objects.create(
            tool=tool,
            action=row.action,
            reason=reason,
            at=now,
            user=user,
            actor=f"user:{user.get_username()}",
            via=row.via,
            before=state,
            after=state,
        )
    return reason
