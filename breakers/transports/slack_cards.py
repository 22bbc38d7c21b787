"""The incident card of bot mode: one Slack message per incident, rebuilt from the incident's
state each time and sent with ``chat.update``. Pure: no Django, no network. The colour bar
(a legacy attachment around the blocks) says the phase; the buttons are what can be done now.
Why: docs/adr/0195-slack-bot-mode-one-message-per-incident.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from breakers.transports.slack_messages import (
    REASON_BUDGET,
    SlackMessage,
    _context,
    _fallback,
    _fields,
    _finish,
    _header,
    _link,
    _name,
    _safe_url,
    _section,
    _slack_time,
    escape_mrkdwn,
    format_duration,
)

__all__ = (
    "ACTION_ACKNOWLEDGE",
    "ACTION_DASHBOARD",
    "ACTION_FORCE_CLOSE",
    "ACTION_FORCE_OPEN",
    "ACTION_RELEASE",
    "ACTION_SILENCE",
    "ACTION_UNSILENCE",
    "COLORS",
    "SILENCE_OPTIONS",
    "IncidentCard",
    "Phase",
    "build_incident_card",
)

# The action ids of the card's elements: POST /slack/actions dispatches on them.
ACTION_ACKNOWLEDGE = "bp_acknowledge"
ACTION_FORCE_OPEN = "bp_force_open"
ACTION_FORCE_CLOSE = "bp_force_close"
ACTION_RELEASE = "bp_release"
ACTION_SILENCE = "bp_silence"
ACTION_UNSILENCE = "bp_unsilence"
ACTION_DASHBOARD = "bp_open_dashboard"
# Silence choices: value -> (label, seconds; None = until the incident recovers).
SILENCE_OPTIONS: dict[str, tuple[str, int | None]] = {
    "30m": ("30 minutes", 30 * 60),
    "2h": ("2 hours", 2 * 3600),
    "8h": ("8 hours", 8 * 3600),
    "recovery": ("until recovery", None),
}


class Phase(StrEnum):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    FORCED = "forced"
    SILENCED = "silenced"
    RECOVERED = "recovered"


COLORS = {
    Phase.OPEN: "#E01E5A",  # red
    Phase.ACKNOWLEDGED: "#ECB22E",  # amber
    Phase.FORCED: "#1264A3",  # blue: a person decides, not the breaker
    Phase.SILENCED: "#8D8D8D",  # grey
    Phase.RECOVERED: "#2EB67D",  # green
}
_EMOJI = {
    Phase.OPEN: "🔴",
    Phase.ACKNOWLEDGED: "🟠",
    Phase.FORCED: "🔵",
    Phase.SILENCED: "🔕",
    Phase.RECOVERED: "🟢",
}
FORCED_STATES = ("forced_open", "forced_closed")


@dataclass(frozen=True, kw_only=True)
class IncidentCard:
    """What the card of one incident shows. Names (``*_by``) are display text, escaped here."""

    incident_id: int
    tool: str
    state: str  # the tool's fleet state now
    opened_at: datetime
    closed_at: datetime | None = None
    reason: str = ""
    last_error: str = ""
    acknowledged_by: str = ""
    acknowledged_at: datetime | None = None
    forced_by: str = ""
    forced_reason: str = ""
    silenced_by: str = ""
    silenced_until: datetime | None = None
    silenced_until_recovery: bool = False
    # The outage ledger's figures (label, value), shown once the incident is over.
    figures: Sequence[tuple[str, str]] = ()
    dashboard_url: str = ""
    now: datetime | None = None

    @property
    def forced(self) -> bool:
        return self.state in FORCED_STATES

    @property
    def silenced(self) -> bool:
        return bool(self.silenced_by) and self.closed_at is None

    @property
    def phase(self) -> Phase:
        if self.closed_at is not None and not self.forced:
            return Phase.RECOVERED
        if self.silenced:
            return Phase.SILENCED
        if self.forced:
            return Phase.FORCED
        if self.acknowledged_by:
            return Phase.ACKNOWLEDGED
        return Phase.OPEN

    @property
    def live(self) -> bool:
        """Anything left to do from the message: the incident is open or the tool is forced."""
        return self.phase != Phase.RECOVERED


def _title(card: IncidentCard, tool: str) -> str:
    phase = card.phase
    if phase == Phase.RECOVERED:
        return f"Recovered: {tool}"
    if card.state == "forced_open":
        return f"Forced open: {tool}"
    if card.state == "forced_closed":
        return f"Forced closed: {tool}"
    if phase == Phase.SILENCED:
        return f"Breaker open (silenced): {tool}"
    if phase == Phase.ACKNOWLEDGED:
        return f"Breaker open (acknowledged): {tool}"
    return f"Breaker open: {tool}"


def _status_lines(card: IncidentCard) -> list[str]:
    lines: list[str] = []
    if card.acknowledged_by:
        when = f" {_slack_time(card.acknowledged_at)}" if card.acknowledged_at else ""
        lines.append(f"*Acknowledged* by {_name(card.acknowledged_by)}{when}")
    if card.forced and card.forced_by:
        verb = "Forced open" if card.state == "forced_open" else "Forced closed"
        why = escape_mrkdwn(card.forced_reason, limit=REASON_BUDGET, one_line=True)
        lines.append(f"*{verb}* by {_name(card.forced_by)}: {why}")
    if card.silenced:
        until = (
            "until recovery"
            if card.silenced_until_recovery or card.silenced_until is None
            else f"until {_slack_time(card.silenced_until)}"
        )
        lines.append(f"*Silenced* {until} by {_name(card.silenced_by)}: no repeat alerts")
    return lines


def _button(text: str, action_id: str, value: str, style: str = "") -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def _silence_select(value: str) -> dict[str, Any]:
    return {
        "type": "static_select",
        "action_id": ACTION_SILENCE,
        "placeholder": {"type": "plain_text", "text": "Silence…"},
        "options": [
            {"text": {"type": "plain_text", "text": label}, "value": f"{value}:{key}"}
            for key, (label, _) in SILENCE_OPTIONS.items()
        ],
    }


def _actions(card: IncidentCard) -> dict[str, Any] | None:
    value = str(card.incident_id)
    elements: list[dict[str, Any]] = []
    if card.live:
        if card.closed_at is None and not card.acknowledged_by:
            elements.append(_button("Acknowledge", ACTION_ACKNOWLEDGE, value, "primary"))
        if card.state != "forced_open":
            elements.append(_button("Force open", ACTION_FORCE_OPEN, value, "danger"))
        if card.state != "forced_closed":
            elements.append(_button("Force close", ACTION_FORCE_CLOSE, value))
        if card.forced:
            elements.append(_button("Release", ACTION_RELEASE, value))
        if card.closed_at is None and not card.silenced:
            elements.append(_silence_select(value))
        if card.silenced:
            elements.append(_button("End silence", ACTION_UNSILENCE, value))
    url = _safe_url(card.dashboard_url)
    if url:
        dashboard = _button("Open in dashboard", ACTION_DASHBOARD, value)
        dashboard["url"] = card.dashboard_url.strip()
        elements.append(dashboard)
    return (
        {"type": "actions", "block_id": f"bp_incident_{value}", "elements": elements}
        if (elements)
        else None
    )


def build_incident_card(card: IncidentCard) -> SlackMessage:
    tool = _name(card.tool)
    phase = card.phase
    title = _title(card, tool)
    reason = escape_mrkdwn(card.reason or "the fleet breaker opened", limit=REASON_BUDGET)
    if phase == Phase.RECOVERED:
        assert card.closed_at is not None
        lead = (
            f"*{tool}* is back in every run's toolset after "
            f"*{format_duration(card.closed_at - card.opened_at)}*."
        )
    elif card.state == "forced_closed":
        lead = f"*{tool}* is kept in every run's toolset by an operator, whatever its breaker says."
    else:
        lead = f"*{tool}* is out of every run's toolset (fleet scope).\n*Reason:* {reason}"
    blocks: list[dict[str, Any]] = [_header(f"{_EMOJI[phase]} {title}"), _section(lead)]
    status = _status_lines(card)
    if status:
        blocks.append(_section("\n".join(status)))
    pairs = [("State", f"`{card.state}`"), ("Opened", _slack_time(card.opened_at))]
    if card.closed_at is not None:
        pairs.append(("Recovered", _slack_time(card.closed_at)))
    pairs += [
        (label, escape_mrkdwn(value, limit=200, one_line=True)) for label, value in card.figures
    ]
    blocks.append(_fields(pairs))
    if card.last_error.strip() and phase != Phase.RECOVERED:
        error = escape_mrkdwn(card.last_error, limit=1500)
        blocks.append(_section(f"*Last error*\n{error}"))
    actions = _actions(card)
    if actions is not None:
        blocks.append(actions)
    blocks.append(_context(_link(card.dashboard_url, "Open the incident") + " · Breaker Panel"))
    summary = f"{title}. " + " ".join(_plain(line) for line in status)
    if phase == Phase.RECOVERED and card.figures:
        summary += " " + "; ".join(f"{label}: {value}" for label, value in card.figures)
    message = _finish(_fallback(summary.strip(), card.dashboard_url), blocks)
    return SlackMessage(text=message.text, blocks=message.blocks, color=COLORS[phase])


def _plain(line: str) -> str:
    """A status line for the notification text: no bold marks, dates as their fallback."""
    return line.replace("*", "") + "."
