"""How agent text, badges and numbers are shown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from django.template import Context, Template

from controlplane.dashboard.templatetags.panel import (
    TITLE_MAX_CHARS,
    agent_text,
    clock,
    duration_ms,
    outcome_badge,
    state_badge,
    usd,
    utc,
)


def test_agent_text_escapes_markup() -> None:
    html = agent_text('<img src=x onerror="alert(1)">', 80)
    assert "<img" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html


def test_agent_text_clips_the_visible_text_and_bounds_the_title() -> None:
    html = agent_text("a" * 5000, 10)
    assert ">aaaaaaaaa…</span>" in html
    title = html.split('title="')[1].split('"')[0]
    assert len(title) == TITLE_MAX_CHARS


def test_agent_text_neutralises_controls_and_bidi_marks() -> None:
    html = agent_text("ok\u202etxt.exe\x07\u2066", 80)
    assert "\u202e" not in html and "\x07" not in html and "\u2066" not in html
    assert html.count("\ufffd") == 6  # three characters, each in the title and the text


def test_agent_text_shows_a_dash_for_nothing() -> None:
    assert "—" in agent_text("", 10)
    assert "—" in agent_text(None, 10)


def test_agent_text_cannot_break_out_of_the_title_attribute() -> None:
    rendered = Template("{% load panel %}{% agent_text name 20 %}").render(
        Context({"name": '" onmouseover="alert(1)'})
    )
    assert 'onmouseover="' not in rendered


@pytest.mark.parametrize(
    ("state", "label"),
    [
        ("closed", "Closed"),
        ("open", "Open"),
        ("half_open", "Half-open"),
        ("forced_open", "Forced open"),
        ("forced_closed", "Forced closed"),
    ],
)
def test_every_state_has_a_text_label_not_only_a_colour(state: str, label: str) -> None:
    html = state_badge(state)
    assert f"state-{state.replace('_', '-')}" in html
    assert html.endswith(f"{label}</span>")


def test_unknown_badge_value_is_escaped_plain_text() -> None:
    html = outcome_badge("<b>boom</b>")
    assert "badge-unknown" in html and "&lt;b&gt;boom&lt;/b&gt;" in html


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, "—"),
        (450, "450 ms"),
        (2300, "2.3 s"),
        (31_000, "31.0 s"),
        (408_000, "6 m 48 s"),
        (3_720_000, "1 h 02 m"),
    ],
)
def test_durations_read_at_a_glance(ms: int | None, text: str) -> None:
    assert duration_ms(ms) == text


def test_money_keeps_fractions_of_a_cent_for_small_amounts() -> None:
    assert usd(Decimal("0.061")) == "$0.0610"
    assert usd(Decimal("410.5")) == "$410.50"
    assert usd(Decimal("1234.5")) == "$1,234.50"


def test_times_are_shown_in_utc() -> None:
    at = datetime(2026, 11, 29, 10, 12, 4, 123456, tzinfo=timezone(timedelta(hours=1)))
    assert utc(at) == "2026-11-29 09:12:04"
    assert clock(at) == "09:12:04.123"
    assert clock(datetime(2026, 11, 29, 9, 0, tzinfo=UTC)) == "09:00:00.000"
