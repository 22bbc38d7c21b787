"""Ending a tool's silence early, from Slack, the tool page or the API: audited like any action,
and idempotent (a silence that is no longer in force is refused with what ended it).
Why: docs/adr/0211-a-silence-ends-early-once-audited-from-anywhere.md."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from breakers.alerts.creation import bot_mode, sync_cards_on_commit
from breakers.fleet_service import FleetError
from breakers.models import UNSILENCE, OperatorAction, Tool, ToolSilence
from runs.models import AgentToken

__all__ = ("NotSilencedError", "end_silence", "silence_text")


class NotSilencedError(FleetError):
    """The silence asked to end is not in force (ended, run out, or there is none)."""


def silence_text(silence: ToolSilence) -> str:
    """How long it was set for, in words: "until 14:30 UTC" or "until recovery"."""
    if silence.until is None:
        return "until recovery"
    return f"until {silence.until:%Y-%m-%d %H:%M} UTC"


def end_silence(
    *,
    tool: Tool,
    silence_id: int | None = None,
    user: User | None = None,
    token: AgentToken | None = None,
    via: str = "",
    where: str = "",
    now: datetime | None = None,
    sync_cards: bool = True,
) -> ToolSilence:
    """End ``silence_id`` (or, without one, the tool's silence in force) now, audited.

    ``via``: the audit row's "where", for Slack ("Slack (@alice)"); ``where``: what the silence
    row records as where it was ended ("tool page", "API"; default ``via``). ``sync_cards``:
    queue the tool's card sync on commit (a Slack press updates its own card instead).
    Raises ``NotSilencedError`` when there is nothing in force to end; nothing changes then.
    """
    now = now or timezone.now()
    actor = _actor(user, token)
    with transaction.atomic():
        rows = ToolSilence.objects.select_for_update(of=("self",)).filter(tool=tool)
        if silence_id is None:
            silence = rows.in_force(now).order_by("-set_at", "-pk").first()
        else:
            silence = rows.filter(pk=silence_id).select_related("incident").first()
        if silence is None or not silence.active_at(now):
            raise NotSilencedError(_not_in_force(tool, silence))
        silence.ended_at = now
        silence.ended_by = _who(actor, via)
        silence.ended_via = (where or via)[:120]
        silence.save(update_fields=["ended_at", "ended_by", "ended_via"])
        state = {"state": tool.state}
        action = OperatorAction.objects.create(
            tool=tool,
            action=UNSILENCE,
            reason=f"ended early the silence by {silence.set_by} ({silence_text(silence)})",
            at=now,
            user=user,
            token=token,
            actor=actor,
            via=via[:120],
            before=state,
            after=state,
        )
        if sync_cards and bot_mode():
            sync_cards_on_commit(tool, (), action)
    return silence


def _actor(user: User | None, token: AgentToken | None) -> str:
    if user is not None:
        return f"user:{user.get_username()}"
    if token is not None:
        return f"token:{token.name} ({token.display_prefix}…)"
    raise FleetError("ending a silence needs a user or an operator token")


def _who(actor: str, via: str) -> str:
    """As silences name people: "@alice via Slack" from Slack, else the audit actor."""
    if via.startswith("Slack (") and via.endswith(")"):
        return f"{via[len('Slack (') : -1]} via Slack"
    return actor


def _not_in_force(tool: Tool, silence: ToolSilence | None) -> str:
    name = tool.name[:100]
    if silence is None:
        return f"{name} has no silence in force; nothing was changed."
    if silence.ended_at is not None:
        by = f" by {silence.ended_by}" if silence.ended_by else ""
        return (
            f"This silence of {name} was already ended at {silence.ended_at:%Y-%m-%d %H:%M} UTC"
            f"{by}; nothing was changed."
        )
    if silence.until is not None:
        return (
            f"This silence of {name} already ran out at {silence.until:%Y-%m-%d %H:%M} UTC; "
            "nothing was changed."
        )
    return f"This silence of {name} ended when its incident recovered; nothing was changed."
