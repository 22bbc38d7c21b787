"""The incident card: its colour, words and buttons follow the incident; agent text stays inert;
Slack's own models accept every block."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from breakers.transports.slack_cards import COLORS, IncidentCard, Phase, build_incident_card
from breakers.transports.slack_messages import check_limits

T0 = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
URL = "https://panel.example.com/incidents/7/"


def card(**fields: Any) -> IncidentCard:
    base: dict[str, Any] = {
        "incident_id": 7,
        "tool": "web_search",
        "state": "open",
        "opened_at": T0,
        "reason": "5 consecutive retryable failures",
        "dashboard_url": URL,
    }
    return IncidentCard(**{**base, **fields})


def element_ids(payload: dict[str, Any]) -> list[str]:
    blocks = payload["attachments"][0]["blocks"]
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


def all_text(payload: dict[str, Any]) -> str:
    out = []
    for block in payload["attachments"][0]["blocks"]:
        for item in [block.get("text"), *(block.get("fields") or [])]:
            if isinstance(item, dict):
                out.append(item["text"])
    return "\n".join(out)


@pytest.mark.parametrize(
    ("fields", "phase", "buttons"),
    [
        ({}, Phase.OPEN, ["bp_acknowledge", "bp_force_open", "bp_force_close", "bp_silence"]),
        (
            {"acknowledged_by": "@ana via Slack", "acknowledged_at": T0},
            Phase.ACKNOWLEDGED,
            ["bp_force_open", "bp_force_close", "bp_silence"],
        ),
        (
            {"state": "forced_open", "forced_by": "@ana via Slack", "forced_reason": "vendor"},
            Phase.FORCED,
            ["bp_acknowledge", "bp_force_close", "bp_release", "bp_silence"],
        ),
        (
            {"silenced_by": "@ana via Slack", "silenced_until": T0 + timedelta(hours=2)},
            Phase.SILENCED,
            ["bp_acknowledge", "bp_force_open", "bp_force_close", "bp_unsilence"],
        ),
        ({"state": "closed", "closed_at": T0 + timedelta(minutes=22)}, Phase.RECOVERED, []),
        (
            {"state": "forced_closed", "closed_at": T0 + timedelta(minutes=3)},
            Phase.FORCED,
            ["bp_force_open", "bp_release"],
        ),
    ],
)
def test_colour_and_buttons_follow_the_incident(
    fields: dict[str, Any], phase: Phase, buttons: list[str]
) -> None:
    payload = build_incident_card(card(**fields)).as_payload()
    assert payload["attachments"][0]["color"] == COLORS[phase]
    assert element_ids(payload) == [*buttons, "bp_open_dashboard"]
    check_limits(payload)
    for block in payload["attachments"][0]["blocks"]:
        parsed = Block.parse(block)
        assert parsed is not None
        parsed.validate_json()  # slack_sdk's own rules, not ours


def test_the_recovered_card_is_green_with_the_ledger_figures() -> None:
    figures = [("Model spend during the incident", "$20.71"), ("Runs affected", "340")]
    message = build_incident_card(
        card(state="closed", closed_at=T0 + timedelta(minutes=22), figures=figures)
    )
    text = all_text(message.as_payload())
    assert "back in every run's toolset after *22m*" in text
    assert "*Model spend during the incident*\n$20.71" in text
    assert "$20.71" in message.text


def test_silenced_until_and_by_whom_are_shown() -> None:
    until = T0 + timedelta(hours=2)
    text = all_text(
        build_incident_card(card(silenced_by="@ana via Slack", silenced_until=until)).as_payload()
    )
    assert f"*Silenced* until <!date^{int(until.timestamp())}^" in text
    assert "by @ana via Slack" in text
    recovery = all_text(
        build_incident_card(
            card(silenced_by="@ana via Slack", silenced_until_recovery=True)
        ).as_payload()
    )
    assert "*Silenced* until recovery" in recovery


def test_agent_text_is_inert_in_the_card() -> None:
    message = build_incident_card(
        card(
            tool="<!channel> *x*",
            reason="<https://evil.example|click> @here",
            last_error="<@U123> & more",
            forced_by="<!everyone>",
            state="forced_open",
            forced_reason="`rm -rf` <b>",
        )
    )
    text = all_text(message.as_payload())
    assert "<!channel>" not in text and "<https://evil" not in text and "<@U123>" not in text
    assert "&lt;!channel&gt;" in text and "&amp; more" in text
    assert "@\u2060here" in text
