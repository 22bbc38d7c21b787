"""Slack messages for fleet breaker alerts: pure functions, no Django, no network. Untrusted text
goes through ``escape_mrkdwn`` (inert and clipped); ``check_limits`` re-checks each message against
Slack's Block Kit limits. Why: docs/adr/0010-agent-text-in-slack-messages-is.md.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlsplit

__all__ = (
    "FALLBACK_TEXT_MAX",
    "FIELD_TEXT_MAX",
    "HEADER_TEXT_MAX",
    "MANUAL_ACTIONS",
    "MAX_BLOCKS",
    "SECTION_FIELDS_MAX",
    "SECTION_TEXT_MAX",
    "TOTAL_BLOCK_TEXT_MAX",
    "ClosedAlert",
    "FlappingAlert",
    "ManualActionAlert",
    "MessageLimitError",
    "OpenedAlert",
    "SlackMessage",
    "build_closed_message",
    "build_flapping_message",
    "build_manual_action_message",
    "build_opened_message",
    "check_limits",
    "clip",
    "escape_mrkdwn",
    "format_duration",
    "format_usd",
    "limit_problems",
    "slack_length",
)

# --- Slack's hard limits -------------------------------------------------------------------
MAX_BLOCKS = 50
HEADER_TEXT_MAX = 150
SECTION_TEXT_MAX = 3000
SECTION_FIELDS_MAX = 10
FIELD_TEXT_MAX = 2000
CONTEXT_ELEMENTS_MAX = 10
ACTIONS_ELEMENTS_MAX = 25
BUTTON_TEXT_MAX = 75
TEXT_OBJECT_MAX = 3000
BLOCK_ID_MAX = 255
# Slack truncates past 40,000 and advises <= 4,000; a notification preview needs far less.
FALLBACK_TEXT_MAX = 4000
# Below the ~13,000 total at which Slack answers msg_blocks_too_long (slackapi/bolt-js#2509).
TOTAL_BLOCK_TEXT_MAX = 12_000

# --- Our budgets for untrusted values, well inside the limits above ------------------------
# Small enough that every field of a message together stays far below TOTAL_BLOCK_TEXT_MAX.
NAME_BUDGET = 100  # tool, worker, operator names
REASON_BUDGET = 1000
ERROR_BUDGET = 1500
LEDGER_METHOD_BUDGET = 1800  # the ledger's method, inside one section (3,000 characters)
WORKERS_SHOWN = 5
URL_MAX = 1000
ELLIPSIS = "…"
EMPTY = "—"

# The fleet states (contract, docs/api.md) and the operator actions an alert can announce.
FLEET_STATES = ("closed", "open", "half_open", "forced_open", "forced_closed")
# Each action's sentence; {actor} and {tool} are filled with already-escaped names.
MANUAL_ACTIONS: Mapping[str, str] = {
    "force_open": "{actor} forced {tool} open",
    "force_close": "{actor} forced {tool} closed",
    "release": "{actor} released {tool} (back to automatic)",
    "reset": "{actor} reset the counters of {tool}",
}


class MessageLimitError(ValueError):
    """A built message breaks one of Slack's limits (a bug in a builder, never user input)."""


@dataclass(frozen=True)
class SlackMessage:
    """What one alert sends: the Block Kit blocks and the plain-text fallback.

    ``color``: the blocks go inside one legacy attachment whose colour bar shows the incident's
    state (bot mode's incident card); empty, they are the message's own blocks.
    """

    text: str
    blocks: tuple[Mapping[str, Any], ...]
    color: str = ""

    def as_payload(self) -> dict[str, Any]:
        # No unfurling: the incident link points inside the company, and a preview of it in
        # the channel would only leak its title; untrusted text never becomes a link anyway.
        blocks = [dict(block) for block in self.blocks]
        payload: dict[str, Any] = {"text": self.text, "unfurl_links": False, "unfurl_media": False}
        if self.color:
            payload["attachments"] = [
                {"color": self.color, "fallback": self.text, "blocks": blocks}
            ]
        else:
            payload["blocks"] = blocks
        return payload


# --- Inputs --------------------------------------------------------------------------------


def _require_aware(name: str, value: datetime) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {value!r}")


def _require_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


def _require_text(name: str, value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")


def _require_state(value: str) -> None:
    if value not in FLEET_STATES:
        raise ValueError(f"state must be one of {', '.join(FLEET_STATES)}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class OpenedAlert:
    """A fleet breaker opened: who pays for it and since when."""

    tool: str
    state: str
    reason: str
    since: datetime
    consecutive_failures: int
    workers: Sequence[str]
    runs_affected: int
    incident_url: str = ""
    last_error: str = ""
    # Set when the spend rule opened it (not the consecutive rule): the spend that did, and in
    # how many runs whose calls to the tool all failed.
    spend_usd: Decimal | None = None
    spend_runs: int = 0

    def __post_init__(self) -> None:
        _require_text("tool", self.tool)
        _require_state(self.state)
        _require_aware("since", self.since)
        _require_count("consecutive_failures", self.consecutive_failures)
        _require_count("runs_affected", self.runs_affected)
        _require_count("spend_runs", self.spend_runs)
        if self.spend_usd is not None and not self.spend_usd >= 0:
            raise ValueError(f"spend_usd must be a non-negative amount, got {self.spend_usd!r}")
        # A str is a Sequence too; a single worker id passed bare would be split into letters.
        if isinstance(self.workers, str):
            raise ValueError("workers must be a sequence of worker ids, not a string")


@dataclass(frozen=True, kw_only=True)
class LedgerLine:
    """The incident's outage ledger (``runs.outage_ledger``) as the recovery message says it."""

    discovery_runs: int
    discovery_spend_usd: Decimal
    discovery_duration_s: float
    hidden_runs: int
    spend_per_hidden_run_usd: Decimal | None
    avoided_usd: Decimal | None  # None: no estimate (``method`` says why)
    avoided_low_usd: Decimal | None
    avoided_high_usd: Decimal | None
    method: str

    def __post_init__(self) -> None:
        _require_count("discovery_runs", self.discovery_runs)
        _require_count("hidden_runs", self.hidden_runs)
        for name in ("avoided_usd", "avoided_low_usd", "avoided_high_usd"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, Decimal) and value.is_finite()):
                raise ValueError(f"{name} must be a finite Decimal or None, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class ClosedAlert:
    """A fleet breaker closed: what the incident cost."""

    tool: str
    opened_at: datetime
    closed_at: datetime
    runs_affected: int
    model_spend_usd: Decimal
    vendor_calls: int
    reason: str = ""
    incident_url: str = ""
    ledger: LedgerLine | None = None

    def __post_init__(self) -> None:
        _require_text("tool", self.tool)
        _require_aware("opened_at", self.opened_at)
        _require_aware("closed_at", self.closed_at)
        if self.closed_at < self.opened_at:
            raise ValueError("closed_at is before opened_at")
        _require_count("runs_affected", self.runs_affected)
        _require_count("vendor_calls", self.vendor_calls)
        if not isinstance(self.model_spend_usd, Decimal) or not self.model_spend_usd.is_finite():
            raise ValueError(
                f"model_spend_usd must be a finite Decimal, got {self.model_spend_usd!r}"
            )
        if self.model_spend_usd < 0:
            raise ValueError(f"model_spend_usd must not be negative, got {self.model_spend_usd}")

    @property
    def downtime(self) -> timedelta:
        return self.closed_at - self.opened_at


@dataclass(frozen=True, kw_only=True)
class ManualActionAlert:
    """An operator acted on a tool fleet-wide: who, what, why."""

    tool: str
    action: str
    actor: str
    reason: str
    at: datetime
    state_after: str = ""
    tool_url: str = ""

    def __post_init__(self) -> None:
        _require_text("tool", self.tool)
        if self.action not in MANUAL_ACTIONS:
            raise ValueError(
                f"action must be one of {', '.join(MANUAL_ACTIONS)}, got {self.action!r}"
            )
        _require_text("actor", self.actor)
        # Every manual action needs a reason (docs/api.md); an alert without one is a bug upstream.
        _require_text("reason", self.reason)
        _require_aware("at", self.at)
        if self.state_after:
            _require_state(self.state_after)


@dataclass(frozen=True, kw_only=True)
class FlappingAlert:
    """A tool kept re-opening inside a short window: one grouped message instead of a storm."""

    tool: str
    reopen_count: int
    window: timedelta
    first_opened_at: datetime
    last_opened_at: datetime
    last_reason: str = ""
    runs_affected: int = 0
    incident_url: str = ""

    def __post_init__(self) -> None:
        _require_text("tool", self.tool)
        _require_count("reopen_count", self.reopen_count)
        _require_count("runs_affected", self.runs_affected)
        if self.window <= timedelta(0):
            raise ValueError(f"window must be positive, got {self.window}")
        _require_aware("first_opened_at", self.first_opened_at)
        _require_aware("last_opened_at", self.last_opened_at)
        if self.last_opened_at < self.first_opened_at:
            raise ValueError("last_opened_at is before first_opened_at")


# --- Escaping, clipping, formatting --------------------------------------------------------

# C0/C1 controls (but tab and newline), zero-width and bidi-override characters: they can hide
# or reorder what an operator reads ("web_search" that is really something else).
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
_WHITESPACE_RUN = re.compile(r"\s+")
# Bare broadcast words: harmless once <!channel> is escaped, but a client that links names
# would still ping everyone; a word joiner after the @ keeps them readable and inert.
_BROADCAST = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)
_WORD_JOINER = "\u2060"
# One display unit for clipping: an entity we made, or one character.
_TOKEN = re.compile(r"&(?:amp|lt|gt);|.", re.DOTALL)


def slack_length(text: str) -> int:
    """Length as Slack may count it: UTF-16 code units (an emoji can count as two)."""
    return len(text.encode("utf-16-le")) // 2


def clip(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit``, else its longest prefix that fits with an ellipsis.

    Never cuts an entity (``&am…``) in half, so a clipped text still renders as written.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if slack_length(text) <= limit:
        return text
    budget = limit - slack_length(ELLIPSIS)
    kept: list[str] = []
    used = 0
    for match in _TOKEN.finditer(text):
        piece = match.group()
        width = slack_length(piece)
        if used + width > budget:
            break
        kept.append(piece)
        used += width
    return "".join(kept) + ELLIPSIS


def escape_mrkdwn(text: str, *, limit: int, one_line: bool = False) -> str:
    """Untrusted text made inert for Slack mrkdwn and clipped to ``limit`` units.

    Removes invisible and control characters, escapes ``&``, ``<`` and ``>`` as Slack asks
    (only those three: Slack decodes no other entity), defuses bare ``@channel``/``@here``/
    ``@everyone``, and clips. ``one_line`` folds newlines and runs of spaces into one space.
    Empty input becomes an em dash, because Slack rejects empty text objects.
    """
    # Escaping only grows text and each character counts at least 1, so nothing past limit+1
    # characters can survive clipping: slicing first bounds the work on a megabyte of error.
    raw = unicodedata.normalize("NFC", text[: limit + 1])
    raw = _INVISIBLE.sub("", raw)
    if one_line:
        raw = _WHITESPACE_RUN.sub(" ", raw)
    raw = raw.strip()
    if not raw:
        return EMPTY
    raw = _BROADCAST.sub(lambda m: "@" + _WORD_JOINER + m.group(1), raw)
    escaped = raw.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return clip(escaped, limit)


def _name(value: str) -> str:
    return escape_mrkdwn(value, limit=NAME_BUDGET, one_line=True)


def _safe_url(url: str) -> str | None:
    """An http(s) URL made safe to put inside ``<…|…>``, or None when it is not one."""
    url = url.strip()
    if not url or len(url) > URL_MAX:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    # Percent-encode everything that could end the link or start a new one (| < > spaces).
    quoted = quote(url, safe=":/?#[]@!$'()*+,;=%~&")
    return quoted.replace("&", "&amp;")


def _link(url: str, label: str) -> str:
    safe = _safe_url(url)
    return f"<{safe}|{label}>" if safe else label


def _plain_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _slack_time(value: datetime) -> str:
    """A Slack date token: each reader sees their own time zone; the fallback is UTC."""
    stamp = int(value.timestamp())
    return f"<!date^{stamp}^{{date_short_pretty}} {{time_secs}}|{_plain_time(value)}>"


def format_duration(value: timedelta) -> str:
    """The two largest units, e.g. ``22m 4s``, ``3h 5m``, ``2d 1h``; ``under 1s`` below that."""
    seconds = int(value.total_seconds())
    if seconds < 1:
        return "under 1s"
    amounts: list[tuple[int, str]] = []
    for suffix, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        amount, seconds = divmod(seconds, size)
        amounts.append((amount, suffix))
    first = next(i for i, (amount, _) in enumerate(amounts) if amount)
    # The two largest units from the first non-zero one; a zero second unit is left out.
    return " ".join(f"{a}{s}" for a, s in amounts[first : first + 2] if a)


def format_usd(value: Decimal) -> str:
    return f"${value:,.2f}"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def _workers_text(workers: Sequence[str]) -> str:
    shown = [f"`{_name(w)}`" for w in list(workers)[:WORKERS_SHOWN]]
    hidden = len(workers) - len(shown)
    listing = ", ".join(shown)
    if hidden > 0:
        listing += f" +{hidden} more"
    return f"{len(workers)} ({listing})" if shown else "0"


# --- Block helpers -------------------------------------------------------------------------


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": clip(text, HEADER_TEXT_MAX)}}


def _mrkdwn(text: str) -> dict[str, Any]:
    # verbatim: Slack must not auto-link URLs or channel names found in the (escaped) text.
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text)}


def _fields(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    items = [_mrkdwn(f"*{label}*\n{value}") for label, value in pairs]
    return {"type": "section", "fields": items[:SECTION_FIELDS_MAX]}


def _context(*parts: str) -> dict[str, Any]:
    return {"type": "context", "elements": [_mrkdwn(p) for p in parts[:CONTEXT_ELEMENTS_MAX]]}


def _fallback(summary: str, url: str) -> str:
    """The plain ``text``: the summary clipped so that the incident link always fits after it."""
    link = _safe_url(url)
    tail = f" {link}" if link else ""
    return clip(summary, FALLBACK_TEXT_MAX - slack_length(tail)) + tail


def _finish(text: str, blocks: list[dict[str, Any]]) -> SlackMessage:
    message = SlackMessage(text=text, blocks=tuple(blocks))
    check_limits(message.as_payload())
    return message


# --- Builders ------------------------------------------------------------------------------


def build_opened_message(alert: OpenedAlert) -> SlackMessage:
    tool = _name(alert.tool)
    reason = escape_mrkdwn(alert.reason, limit=REASON_BUDGET)
    forced = alert.state == "forced_open"
    title = f"Breaker {'forced open' if forced else 'open'}: {tool}"
    if alert.spend_usd is not None:
        evidence = f"{format_usd(alert.spend_usd)} in {_plural(alert.spend_runs, 'failing run')}"
        rule_field = ("Spend rule", evidence)
        summary_rule = f"spend rule: {evidence}"
    else:
        rule_field = ("Consecutive failures", f"{alert.consecutive_failures:,}")
        summary_rule = _plural(alert.consecutive_failures, "consecutive failure")
    blocks: list[dict[str, Any]] = [
        _header(f"🔴 {title}"),
        _section(
            f"*{tool}* was taken out of every run's toolset (fleet scope).\n*Reason:* {reason}"
        ),
        _fields(
            [
                ("Tool", f"`{tool}`"),
                ("State", f"`{alert.state}`"),
                rule_field,
                ("Workers behind it", _workers_text(alert.workers)),
                ("Since", _slack_time(alert.since)),
                ("Runs affected so far", f"{alert.runs_affected:,}"),
            ]
        ),
    ]
    if alert.last_error.strip():
        error = escape_mrkdwn(alert.last_error, limit=ERROR_BUDGET)
        blocks.append(_section(f"*Last error*\n{error}"))
    blocks.append(_context(_link(alert.incident_url, "Open the incident") + " · Breaker Panel"))
    summary = (
        f"{title} (fleet). {reason.rstrip('.')}. "
        f"{summary_rule} from "
        f"{_plural(len(alert.workers), 'worker')} since {_plain_time(alert.since)}; "
        f"{_plural(alert.runs_affected, 'run')} affected so far."
    )
    return _finish(_fallback(summary, alert.incident_url), blocks)


def build_closed_message(alert: ClosedAlert) -> SlackMessage:
    tool = _name(alert.tool)
    downtime = format_duration(alert.downtime)
    spend = format_usd(alert.model_spend_usd)
    title = f"Breaker closed: {tool}"
    why = escape_mrkdwn(alert.reason, limit=REASON_BUDGET) if alert.reason.strip() else ""
    lead = f"*{tool}* is back in every run's toolset after *{downtime}*."
    blocks: list[dict[str, Any]] = [
        _header(f"🟢 {title}"),
        _section(f"{lead}\n*Why:* {why}" if why else lead),
        _fields(
            [
                ("Tool", f"`{tool}`"),
                ("Downtime", downtime),
                ("Opened", _slack_time(alert.opened_at)),
                ("Closed", _slack_time(alert.closed_at)),
                ("Runs affected", f"{alert.runs_affected:,}"),
                ("Model spend during the incident", spend),
                ("Vendor calls during the incident", f"{alert.vendor_calls:,}"),
            ]
        ),
    ]
    if alert.ledger is not None:
        blocks.append(_section(_ledger_text(alert.ledger)))
    blocks.append(_context(_link(alert.incident_url, "Open the incident") + " · Breaker Panel"))
    summary = (
        f"{title} after {downtime}. {_plural(alert.runs_affected, 'run')} affected, "
        f"{spend} model spend and {_plural(alert.vendor_calls, 'vendor call')} during the incident."
    )
    if alert.ledger is not None and alert.ledger.avoided_usd is not None:
        summary += f" Spend avoided (estimate): {format_usd(alert.ledger.avoided_usd)}."
    if why:
        summary += f" {why}"
    return _finish(_fallback(summary, alert.incident_url), blocks)


def _ledger_text(ledger: LedgerLine) -> str:
    per_run = (
        f" ({format_usd(ledger.spend_per_hidden_run_usd)} per run)"
        if ledger.spend_per_hidden_run_usd is not None
        else ""
    )
    lines = [
        "*Outage ledger*",
        f"Hit the failing tool before it was hidden: {_plural(ledger.discovery_runs, 'run')}, "
        f"{format_usd(ledger.discovery_spend_usd)} model spend, "
        f"{format_duration(timedelta(seconds=ledger.discovery_duration_s))} of run time.",
        f"Ran while it was hidden: {_plural(ledger.hidden_runs, 'run')}{per_run}.",
    ]
    if ledger.avoided_usd is not None:
        low, high = ledger.avoided_low_usd, ledger.avoided_high_usd
        span = (
            f" (range {format_usd(low)} to {format_usd(high)})"
            if low is not None and high is not None
            else ""
        )
        lines.append(f"*Spend avoided (estimate):* {format_usd(ledger.avoided_usd)}{span}")
    lines.append("_Method:_ " + escape_mrkdwn(ledger.method, limit=LEDGER_METHOD_BUDGET))
    return "\n".join(lines)


def build_manual_action_message(alert: ManualActionAlert) -> SlackMessage:
    tool = _name(alert.tool)
    actor = _name(alert.actor)
    reason = escape_mrkdwn(alert.reason, limit=REASON_BUDGET)
    # str.format does not re-read what it substitutes, so braces in a name stay literal.
    sentence = MANUAL_ACTIONS[alert.action].format(actor=actor, tool=tool)
    fields = [
        ("Tool", f"`{tool}`"),
        ("Action", f"`{alert.action}`"),
        ("Who", actor),
        ("When", _slack_time(alert.at)),
    ]
    if alert.state_after:
        fields.append(("State now", f"`{alert.state_after}`"))
    blocks: list[dict[str, Any]] = [
        _header(f"🛠️ {sentence}"),
        _section(f"*Why:* {reason}"),
        _fields(fields),
        _context(_link(alert.tool_url, "Open the tool") + " · every manual action is audited"),
    ]
    summary = f"Manual action: {sentence}. Why: {reason}"
    return _finish(_fallback(summary, alert.tool_url), blocks)


def build_flapping_message(alert: FlappingAlert) -> SlackMessage:
    tool = _name(alert.tool)
    window = format_duration(alert.window)
    times = _plural(alert.reopen_count, "time")
    title = f"Flapping: {tool}"
    lead = (
        f"*{tool}* re-opened {times} within {window}. Further re-opens inside this window are "
        "grouped here instead of alerting one by one."
    )
    reason = escape_mrkdwn(alert.last_reason, limit=REASON_BUDGET) if alert.last_reason else ""
    blocks: list[dict[str, Any]] = [
        _header(f"⚠️ {title}"),
        _section(f"{lead}\n*Last reason:* {reason}" if reason else lead),
        _fields(
            [
                ("Tool", f"`{tool}`"),
                ("Re-opens", f"{alert.reopen_count:,} in {window}"),
                ("First opened", _slack_time(alert.first_opened_at)),
                ("Last opened", _slack_time(alert.last_opened_at)),
                ("Runs affected", f"{alert.runs_affected:,}"),
            ]
        ),
        _context(_link(alert.incident_url, "Open the incident") + " · Breaker Panel"),
    ]
    summary = f"{title} re-opened {times} within {window} (grouped into one alert)."
    if reason:
        summary += f" Last reason: {reason}"
    return _finish(_fallback(summary, alert.incident_url), blocks)


# --- Limits --------------------------------------------------------------------------------


def _text_problems(where: str, obj: Any, *, limit: int, kind: str | None = None) -> list[str]:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("text"), str):
        return [f"{where}: not a text object"]
    problems = []
    if kind and obj.get("type") != kind:
        problems.append(f"{where}: must be {kind}, is {obj.get('type')!r}")
    length = slack_length(obj["text"])
    if length < 1:
        problems.append(f"{where}: empty text")
    if length > limit:
        problems.append(f"{where}: {length} characters, limit {limit}")
    return problems


def _block_problems(index: int, block: Mapping[str, Any]) -> list[str]:
    where = f"blocks[{index}]"
    problems: list[str] = []
    if len(str(block.get("block_id", ""))) > BLOCK_ID_MAX:
        problems.append(f"{where}.block_id: longer than {BLOCK_ID_MAX}")
    kind = block.get("type")
    if kind == "header":
        problems += _text_problems(
            f"{where}.text", block.get("text"), limit=HEADER_TEXT_MAX, kind="plain_text"
        )
    elif kind == "section":
        fields = block.get("fields")
        if "text" not in block and not fields:
            problems.append(f"{where}: a section needs text or fields")
        if "text" in block:
            problems += _text_problems(f"{where}.text", block["text"], limit=SECTION_TEXT_MAX)
        if fields is not None:
            if len(fields) > SECTION_FIELDS_MAX:
                problems.append(f"{where}.fields: {len(fields)} items, limit {SECTION_FIELDS_MAX}")
            for i, item in enumerate(fields):
                problems += _text_problems(f"{where}.fields[{i}]", item, limit=FIELD_TEXT_MAX)
    elif kind == "context":
        elements = block.get("elements") or []
        if not 1 <= len(elements) <= CONTEXT_ELEMENTS_MAX:
            problems.append(f"{where}.elements: {len(elements)} items, 1..{CONTEXT_ELEMENTS_MAX}")
        for i, item in enumerate(elements):
            problems += _text_problems(f"{where}.elements[{i}]", item, limit=TEXT_OBJECT_MAX)
    elif kind == "actions":
        elements = block.get("elements") or []
        if not 1 <= len(elements) <= ACTIONS_ELEMENTS_MAX:
            problems.append(f"{where}.elements: {len(elements)} items, 1..{ACTIONS_ELEMENTS_MAX}")
        for i, item in enumerate(elements):
            if len(str(item.get("action_id", ""))) > BLOCK_ID_MAX:
                problems.append(f"{where}.elements[{i}].action_id: longer than {BLOCK_ID_MAX}")
            if "text" in item:
                problems += _text_problems(
                    f"{where}.elements[{i}].text", item["text"], limit=BUTTON_TEXT_MAX
                )
    elif kind != "divider":
        problems.append(f"{where}: block type {kind!r} is not one we build")
    return problems


def _block_texts(block: Mapping[str, Any]) -> Iterable[str]:
    if isinstance(block.get("text"), Mapping):
        yield str(block["text"].get("text", ""))
    for key in ("fields", "elements"):
        for item in block.get(key) or []:
            if isinstance(item, Mapping):
                yield str(item.get("text", ""))


def limit_problems(payload: Mapping[str, Any]) -> list[str]:
    """Every way ``payload`` breaks Slack's limits (empty when it is fine to send)."""
    problems: list[str] = []
    text = payload.get("text")
    if not isinstance(text, str) or not text.strip():
        problems.append("text: the plain-text fallback is missing")
    elif slack_length(text) > FALLBACK_TEXT_MAX:
        problems.append(f"text: {slack_length(text)} characters, limit {FALLBACK_TEXT_MAX}")
    blocks = list(payload.get("blocks") or [])
    for attachment in payload.get("attachments") or []:
        blocks += attachment.get("blocks") or []
    if len(blocks) > MAX_BLOCKS:
        problems.append(f"blocks: {len(blocks)} blocks, limit {MAX_BLOCKS}")
    total = 0
    for index, block in enumerate(blocks):
        problems += _block_problems(index, block)
        total += sum(slack_length(t) for t in _block_texts(block))
    if total > TOTAL_BLOCK_TEXT_MAX:
        problems.append(f"blocks: {total} characters in all, limit {TOTAL_BLOCK_TEXT_MAX}")
    return problems


def check_limits(payload: Mapping[str, Any]) -> None:
    """Raise :class:`MessageLimitError` naming every limit that ``payload`` breaks."""
    problems = limit_problems(payload)
    if problems:
        raise MessageLimitError("; ".join(problems))
