"""Template helpers for showing untrusted agent text and breaker facts at a glance.

Everything an agent sends (tool, agent, worker and model names, errors, reasons) goes through
``agent_text``: escaped by ``format_html``, stripped of characters that can disguise it, cut to a
length that fits the layout, with the (also escaped, also bounded) full value in ``title``.
Badges always carry a text label and a glyph, never colour alone.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache

from django import template
from django.urls import get_script_prefix, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# C0/C1 control characters and the bidi embedding/override/isolate marks: an agent-sent
# "tool name" with U+202E can make text read backwards and pass for another name.
_DISGUISING_CHARS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
TITLE_MAX_CHARS = 2000
_NOTHING = mark_safe('<span class="muted">—</span>')  # a constant: nothing from outside in it


def clean_agent_text(value: object) -> str:
    text = "" if value is None else str(value)
    return _DISGUISING_CHARS.sub("\ufffd", text)


def clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


@register.simple_tag
def agent_text(value: object, max_chars: int = 60, css_class: str = "") -> SafeString:
    """Untrusted text, escaped and clipped; the full value (bounded) is in the title."""
    text = clean_agent_text(value)
    if not text:
        return _NOTHING
    return format_html(
        '<span class="agent-text {}" title="{}">{}</span>',
        css_class,
        clip(text, TITLE_MAX_CHARS),
        clip(text, max_chars),
    )


def clip_middle(text: str, max_chars: int) -> str:
    """Clip the middle, keeping more of the end: the worker ids of one deployment share a long
    prefix and differ at the end ("…-worker-07")."""
    if len(text) <= max_chars:
        return text
    tail = (max_chars - 1) * 3 // 5
    return text[: max_chars - 1 - tail] + "…" + text[len(text) - tail :]


@register.simple_tag
def worker_name(value: object, max_chars: int = 28) -> SafeString:
    """A worker id, escaped, clipped in the middle so that its end stays readable."""
    text = clean_agent_text(value)
    if not text:
        return _NOTHING
    # The inner span is every piece of agent text's markup; the wrapper lifts the CSS clipping.
    return format_html(
        '<span class="id-text"><span class="agent-text mono" title="{}">{}</span></span>',
        clip(text, TITLE_MAX_CHARS),
        clip_middle(text, max_chars),
    )


_BREAKER_STATES: dict[str, tuple[str, str]] = {
    "closed": ("●", "Closed"),
    "open": ("✕", "Open"),
    "half_open": ("◐", "Half-open"),
    "forced_open": ("✕", "Forced open"),
    "forced_closed": ("●", "Forced closed"),
}
_OUTCOMES: dict[str, tuple[str, str]] = {
    "success": ("✓", "success"),
    "retryable": ("↻", "retryable"),
    "semantic": ("!", "semantic"),
    "degraded": ("∅", "degraded"),
    "blocked": ("⊘", "blocked"),
}
_SCOPES: dict[str, tuple[str, str]] = {
    "run": ("R", "run scope"),
    "worker": ("W", "worker scope"),
    "fleet": ("F", "fleet scope"),
}
_RUN_STATUSES: dict[str, tuple[str, str]] = {
    "running": ("▶", "running"),
    "completed": ("✓", "completed"),
    "failed": ("✕", "failed"),
    "cancelled": ("\u2013", "cancelled"),
}


def _badge(kind: str, value: object, known: dict[str, tuple[str, str]]) -> SafeString:
    key = str(value)
    if key not in known:
        # Ingest validates these; anything else is shown as plain, neutral, escaped text.
        return format_html('<span class="badge badge-unknown">{}</span>', clip(key, 30))
    glyph, label = known[key]
    return format_html(
        '<span class="badge {}-{}"><span class="glyph" aria-hidden="true">{}</span>{}</span>',
        kind,
        key.replace("_", "-"),
        glyph,
        label,
    )


@register.simple_tag
def state_badge(state: object) -> SafeString:
    return _badge("state", state, _BREAKER_STATES)


@register.simple_tag
def outcome_badge(outcome: object) -> SafeString:
    return _badge("outcome", outcome, _OUTCOMES)


@register.simple_tag
def run_status_badge(status: object) -> SafeString:
    return _badge("status", status, _RUN_STATUSES)


@register.simple_tag
def scope_badge(scope: object) -> SafeString:
    return _badge("scope", scope, _SCOPES)


@register.filter
def duration_ms(value: int | None) -> str:
    """Milliseconds for a human at 3 a.m.: 450 ms, 2.3 s, 6 m 48 s, 1 h 02 m."""
    if value is None:
        return "—"
    ms = int(value)
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    seconds = ms // 1000
    if seconds < 3600:
        return f"{seconds // 60} m {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} m"


@register.filter
def usd(value: Decimal | float | None) -> str:
    if value is None:
        return "—"
    amount = Decimal(value)
    # Single model calls cost fractions of a cent; totals read better with cents.
    return f"${amount:,.4f}" if abs(amount) < 1 else f"${amount:,.2f}"


@register.filter
def num(value: int | None) -> str:
    return "—" if value is None else f"{int(value):,}"


@register.filter
def utc(value: datetime | None) -> str:
    if value is None:
        return "—"
    # On-call people across time zones compare notes in UTC; the layout says so.
    return _as_utc(value).strftime("%Y-%m-%d %H:%M:%S")


@register.filter
def clock(value: datetime | None) -> str:
    """Time of day to the millisecond: steps of one run are seconds apart."""
    return "—" if value is None else _as_utc(value).strftime("%H:%M:%S.%f")[:-3]


@register.filter
def hhmm(value: datetime | None) -> str:
    """Hours and minutes in UTC, for a time within the day ahead (a silence's end)."""
    return "—" if value is None else _as_utc(value).strftime("%H:%M")


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@register.filter
def iso(value: datetime | None) -> str:
    """ISO 8601 in UTC, for ``<time datetime>`` and the page's own clock."""
    return "" if value is None else _as_utc(value).isoformat(timespec="milliseconds")


@register.simple_tag
def elapsed(start: datetime | None, end: datetime | None) -> str:
    """How long from ``start`` to ``end``, coarsely: 45 s, 3 m 12 s, 2 h 05 m, 3 d 4 h."""
    if start is None or end is None:
        return "—"
    seconds = max(0, int((end - start).total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} m {seconds % 60:02d} s"
    if seconds < 86_400:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} m"
    return f"{seconds // 86_400} d {seconds % 86_400 // 3600} h"


@register.filter
def names_list(values: object, limit: int = 8) -> str:
    """A short, plain list of agent-sent names for a ``title`` (escaped where it is output)."""
    if not values:
        return ""
    names = [clip(clean_agent_text(name), 60) for name in values]  # type: ignore[attr-defined]
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _counts_text(counts: dict[str, int], limit: int = 5) -> str:
    ranked = sorted(counts.items(), key=lambda item: (-int(item[1]), item[0]))
    parts = [f"{clip(clean_agent_text(name), 40)} ({n})" for name, n in ranked[:limit]]
    if len(ranked) > limit:
        parts.append(f"{len(ranked) - limit} more")
    return ", ".join(parts)


def _usd_text(value: object) -> str:
    return f"${value:,.2f}" if isinstance(value, int | float) else "$?"


def _seconds_text(value: object) -> str:
    if not isinstance(value, int | float):
        return "?"
    return f"{value / 60:g} min" if value % 60 == 0 else f"{value:g} s"


@register.simple_tag
def cause_text(kind: str, cause: object) -> str:
    """What caused a fleet transition, in one line (plain text: show it with ``agent_text``)."""
    data = cause if isinstance(cause, dict) else {}
    if kind == "failures":
        workers = data.get("workers") or {}
        return (
            f"{data.get('consecutive', '?')} consecutive retryable failures from "
            f"{len(workers)} workers: {_counts_text(workers)}"
        )
    if kind == "spend":
        workers = data.get("workers") or {}
        return (
            f"spend rule: {_usd_text(data.get('spend_usd'))} burned in {data.get('runs', '?')} "
            f"runs whose calls all failed, within {_seconds_text(data.get('window_seconds'))} "
            f"(amount {_usd_text(data.get('amount_usd'))}), from {len(workers)} workers: "
            f"{_counts_text(workers)}"
        )
    if kind == "cooldown":
        seconds = int(data.get("cooldown_ms") or 0) / 1000
        if data.get("trial") == "probe":
            return f"cooldown of {seconds:g} s elapsed; one trial by the probe"
        # Half-open can last: nothing happens until an agent that uses the fleet breaker asks
        # for the trial lease (agents limited to run or worker scope never do).
        return (
            f"cooldown of {seconds:g} s elapsed; waiting for one trial call, made by the first "
            "agent using the fleet breaker that takes the trial lease"
        )
    if kind == "trial":
        holder = str(data.get("holder") or "")
        who = "the probe" if holder == "probe" else f"worker {data.get('worker') or holder}"
        return f"trial by {who}: {data.get('outcome', '?')}"
    if kind == "operator":
        action = str(data.get("action", "?")).replace("_", " ")
        return f"{action} by {data.get('actor', 'an operator')}: {data.get('reason', '')}"
    return str(kind)


@register.simple_tag
def counts_text(counts: object, limit: int = 5) -> str:
    return _counts_text(counts if isinstance(counts, dict) else {}, limit)


_ACTION_LABELS = {
    "force_open": "Force open",
    "force_close": "Force close",
    "release": "Release",
    "reset": "Reset",
    "acknowledge": "Acknowledge",
    "silence": "Silence",
    "unsilence": "End silence",
}


@register.filter
def action_label(value: object) -> str:
    return _ACTION_LABELS.get(str(value), clip(str(value), 30))


@register.filter
def get_item(mapping: object, key: object) -> object:
    return mapping.get(key, "") if isinstance(mapping, dict) else ""


_PK_MARKER = 987654321


@lru_cache(maxsize=32)
def _url_pattern(name: str, script_prefix: str) -> str:
    return reverse(f"dashboard:{name}", args=[_PK_MARKER])


@register.filter
def pk_url(pk: int, name: str = "tool") -> str:
    """``{% url "dashboard:<name>" pk %}`` for lists of hundreds of rows: one ``reverse`` per
    URL name, not one per row (the board renders three links per tool every time it changes)."""
    return _url_pattern(name, get_script_prefix()).replace(str(_PK_MARKER), str(int(pk)))


@register.filter
def plain(value: object, max_chars: int = 60) -> str:
    """Agent text for attributes (``aria-label``, ``data-*``): cleaned and clipped; the template
    escapes it like any string."""
    return clip(clean_agent_text(value), int(max_chars))


@register.filter
def share(value: float | None) -> str:
    """A share as a percentage ("83%", "0.4%"); "—" when it is unknown."""
    if value is None:
        return "—"
    pct = value * 100
    return f"{pct:.0f}%" if pct >= 9.95 or pct == 0 else f"{pct:.1f}%"
