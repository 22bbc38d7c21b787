"""Alert message contents, escaping of untrusted text, and Slack's Block Kit limits."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from breakers.transports.slack import SlackTransport
from breakers.transports.slack_messages import (
    FALLBACK_TEXT_MAX,
    FIELD_TEXT_MAX,
    HEADER_TEXT_MAX,
    SECTION_TEXT_MAX,
    TOTAL_BLOCK_TEXT_MAX,
    ClosedAlert,
    FlappingAlert,
    LedgerLine,
    ManualActionAlert,
    MessageLimitError,
    OpenedAlert,
    SlackMessage,
    build_closed_message,
    build_flapping_message,
    build_manual_action_message,
    build_opened_message,
    check_limits,
    clip,
    escape_mrkdwn,
    format_duration,
    format_usd,
    limit_problems,
    slack_length,
)
from scripts.testing.fake_slack import FakeSlackServer

SINCE = datetime(2026, 11, 29, 9, 12, 4, tzinfo=UTC)
INCIDENT = "https://panel.example/incidents/42"
HOSTILE = "<!channel> <https://evil.example|click here> &amp; @here <@U123> <#C1>"
# Every <…> we emit ourselves: a date token or a link to the panel. Anything else is injection.
OURS = re.compile(
    r"<!date\^\d+\^\{date_short_pretty\} \{time_secs\}\|[^<>|]+>"
    r"|<https://panel\.example/[^<>|\s]*\|[^<>|]+>"
)


def opened(**overrides: Any) -> OpenedAlert:
    values: dict[str, Any] = {
        "tool": "web_search",
        "state": "open",
        "reason": "5 consecutive retryable failures",
        "since": SINCE,
        "consecutive_failures": 5,
        "workers": ("research-worker-3", "research-worker-7"),
        "runs_affected": 14,
        "incident_url": INCIDENT,
        "last_error": "ToolFailure: 503 from vendor",
    }
    return OpenedAlert(**{**values, **overrides})


def closed(**overrides: Any) -> ClosedAlert:
    values: dict[str, Any] = {
        "tool": "web_search",
        "opened_at": SINCE,
        "closed_at": SINCE + timedelta(minutes=22, seconds=4),
        "runs_affected": 340,
        "model_spend_usd": Decimal("410.5"),
        "vendor_calls": 3700,
        "reason": "half-open probe succeeded",
        "incident_url": INCIDENT,
    }
    return ClosedAlert(**{**values, **overrides})


def manual(**overrides: Any) -> ManualActionAlert:
    values: dict[str, Any] = {
        "tool": "web_search",
        "action": "force_open",
        "actor": "alice@example.com",
        "reason": "vendor status page says degraded",
        "at": SINCE,
        "state_after": "forced_open",
        "tool_url": "https://panel.example/tools/web_search",
    }
    return ManualActionAlert(**{**values, **overrides})


def flapping(**overrides: Any) -> FlappingAlert:
    values: dict[str, Any] = {
        "tool": "web_search",
        "reopen_count": 4,
        "window": timedelta(minutes=10),
        "first_opened_at": SINCE,
        "last_opened_at": SINCE + timedelta(minutes=8),
        "last_reason": "half-open probe failed: 503",
        "runs_affected": 61,
        "incident_url": INCIDENT,
    }
    return FlappingAlert(**{**values, **overrides})


def all_messages(
    *,
    tool: str = "web_search",
    reason: str = "5 consecutive retryable failures",
    actor: str = "alice@example.com",
    workers: tuple[str, ...] = ("research-worker-3",),
    last_error: str = "ToolFailure: 503 from vendor",
) -> list[SlackMessage]:
    """One message of each kind, sharing the untrusted values a test wants to vary."""
    return [
        build_opened_message(
            opened(tool=tool, reason=reason, workers=workers, last_error=last_error)
        ),
        build_closed_message(closed(tool=tool, reason=reason)),
        build_manual_action_message(manual(tool=tool, reason=reason, actor=actor)),
        build_flapping_message(flapping(tool=tool, last_reason=reason)),
    ]


def texts(message: SlackMessage) -> Iterator[str]:
    """Every string Slack will render: the fallback and each text object in the blocks."""
    yield message.text
    for block in message.blocks:
        if isinstance(block.get("text"), Mapping):
            yield block["text"]["text"]
        for key in ("fields", "elements"):
            for item in block.get(key, ()):
                yield item["text"]


def field_texts(message: SlackMessage) -> list[str]:
    return [f["text"] for b in message.blocks for f in b.get("fields", ())]


def header(message: SlackMessage) -> str:
    [block] = [b for b in message.blocks if b["type"] == "header"]
    return str(block["text"]["text"])


def validate_with_slack_sdk(message: SlackMessage) -> None:
    """slack_sdk's own models, independent of our check_limits, must accept every block."""
    payload = message.as_payload()
    assert len(payload["blocks"]) <= 50
    for raw in payload["blocks"]:
        block = Block.parse(raw)
        assert block is not None, raw
        block.validate_json()


# --- contents ------------------------------------------------------------------------------


def test_opened_message_says_what_opened_why_since_when_and_who_pays() -> None:
    message = build_opened_message(opened())
    stamp = int(SINCE.timestamp())

    assert header(message) == "🔴 Breaker open: web_search"
    fields = field_texts(message)
    assert "*Tool*\n`web_search`" in fields
    assert "*State*\n`open`" in fields
    assert "*Consecutive failures*\n5" in fields
    assert "*Workers behind it*\n2 (`research-worker-3`, `research-worker-7`)" in fields
    assert (
        f"*Since*\n<!date^{stamp}^{{date_short_pretty}} {{time_secs}}|2026-11-29 09:12:04 UTC>"
        in fields
    )
    assert "*Runs affected so far*\n14" in fields
    body = "\n".join(texts(message))
    assert "*Reason:* 5 consecutive retryable failures" in body
    assert "*Last error*\nToolFailure: 503 from vendor" in body
    assert f"<{INCIDENT}|Open the incident>" in body
    assert message.text == (
        "Breaker open: web_search (fleet). 5 consecutive retryable failures. "
        "5 consecutive failures from 2 workers since 2026-11-29 09:12:04 UTC; "
        f"14 runs affected so far. {INCIDENT}"
    )


def test_forced_open_is_called_so() -> None:
    message = build_opened_message(opened(state="forced_open"))
    assert header(message) == "🔴 Breaker forced open: web_search"
    assert "*State*\n`forced_open`" in field_texts(message)


def test_many_workers_are_summed_up_not_listed() -> None:
    workers = tuple(f"w{i}" for i in range(40))
    fields = field_texts(build_opened_message(opened(workers=workers)))
    assert "*Workers behind it*\n40 (`w0`, `w1`, `w2`, `w3`, `w4` +35 more)" in fields


def test_closed_message_gives_downtime_runs_spend_and_vendor_calls() -> None:
    message = build_closed_message(closed())

    assert header(message) == "🟢 Breaker closed: web_search"
    fields = field_texts(message)
    assert "*Downtime*\n22m 4s" in fields
    assert "*Runs affected*\n340" in fields
    assert "*Model spend during the incident*\n$410.50" in fields
    assert "*Vendor calls during the incident*\n3,700" in fields
    assert "*Why:* half-open probe succeeded" in "\n".join(texts(message))
    assert message.text.startswith(
        "Breaker closed: web_search after 22m 4s. 340 runs affected, $410.50 model spend and "
        "3,700 vendor calls during the incident."
    )
    assert message.text.endswith(INCIDENT)


@pytest.mark.parametrize(
    ("action", "sentence"),
    [
        ("force_open", "alice@example.com forced web_search open"),
        ("force_close", "alice@example.com forced web_search closed"),
        ("release", "alice@example.com released web_search (back to automatic)"),
        ("reset", "alice@example.com reset the counters of web_search"),
    ],
)
def test_manual_action_message_says_who_did_what_and_why(action: str, sentence: str) -> None:
    message = build_manual_action_message(manual(action=action, state_after=""))

    assert header(message) == f"🛠️ {sentence}"
    fields = field_texts(message)
    assert f"*Action*\n`{action}`" in fields
    assert "*Who*\nalice@example.com" in fields
    assert "*Why:* vendor status page says degraded" in "\n".join(texts(message))
    assert message.text.startswith(
        f"Manual action: {sentence}. Why: vendor status page says degraded"
    )


def test_flapping_message_groups_the_reopens_into_one() -> None:
    message = build_flapping_message(flapping())

    assert header(message) == "⚠️ Flapping: web_search"
    body = "\n".join(texts(message))
    assert "re-opened 4 times within 10m" in body
    assert "grouped here instead of alerting one by one" in body
    assert "*Re-opens*\n4 in 10m" in field_texts(message)
    assert "*Last reason:* half-open probe failed: 503" in body
    assert message.text.startswith("Flapping: web_search re-opened 4 times within 10m")


def test_every_message_has_a_plain_text_fallback_and_no_unfurling() -> None:
    for message in all_messages():
        payload = message.as_payload()
        assert payload["text"].strip()
        # Slack shows the fallback in notifications, where date tokens are not rendered.
        assert "<!date" not in payload["text"]
        assert payload["unfurl_links"] is False
        assert payload["unfurl_media"] is False
        json.dumps(payload)  # serialisable as is


# --- untrusted text ------------------------------------------------------------------------


def test_hostile_text_renders_inert_in_every_message() -> None:
    messages = all_messages(
        tool=HOSTILE,
        reason=HOSTILE,
        actor=HOSTILE,
        workers=(HOSTILE, "ok-worker"),
        last_error=HOSTILE,
    )
    for message in messages:
        for text in texts(message):
            leftover = OURS.sub("", text)
            assert "<" not in leftover and ">" not in leftover, text
            assert not re.search(r"@(channel|here|everyone)\b", text), text
        rendered = "\n".join(texts(message))
        # Still shown to the reader, as text: Slack decodes the entities for display.
        assert "&lt;!channel&gt; &lt;https://evil.example|click here&gt; &amp;amp;" in rendered
        validate_with_slack_sdk(message)


def test_a_hostile_link_cannot_break_out_of_its_brackets() -> None:
    message = build_opened_message(opened(incident_url="https://panel.example/x|<!channel> y"))
    rendered = "\n".join(texts(message))
    assert "<!channel>" not in rendered
    assert "<https://panel.example/x%7C%3C!channel%3E%20y|Open the incident>" in rendered


@pytest.mark.parametrize("url", ["javascript:alert(1)", "ftp://x/y", "//evil.example/", ""])
def test_a_link_that_is_not_http_is_left_out(url: str) -> None:
    message = build_opened_message(opened(incident_url=url))
    rendered = "\n".join(texts(message))
    assert "Open the incident" in rendered
    assert "<javascript" not in rendered and "evil" not in rendered and "ftp:" not in rendered


def test_control_zero_width_and_bidi_characters_are_removed() -> None:
    message = build_opened_message(opened(tool="web\u202e_sea\u200brch\x00\x1b[31m"))
    assert header(message) == "🔴 Breaker open: web_search[31m"


def test_names_are_kept_on_one_line() -> None:
    message = build_opened_message(opened(tool="web\n\n*search*\r\n  now"))
    assert header(message) == "🔴 Breaker open: web *search* now"


def test_escaping_is_applied_exactly_once() -> None:
    assert escape_mrkdwn("a & b < c > d", limit=100) == "a &amp; b &lt; c &gt; d"
    assert escape_mrkdwn("&lt;", limit=100) == "&amp;lt;"
    assert escape_mrkdwn("   \x00\u200b ", limit=100) == "—"


# --- limits --------------------------------------------------------------------------------


def test_huge_untrusted_texts_are_clipped_within_slacks_limits() -> None:
    huge = "<E&>" * 250_000  # a megabyte of error, each character needing an escape
    messages = all_messages(
        tool="t" * 10_000,
        reason=huge,
        actor="a" * 10_000,
        workers=tuple("w" * 300 + str(i) for i in range(500)),
        last_error=huge,
    )
    for message in messages:
        check_limits(message.as_payload())
        validate_with_slack_sdk(message)
        assert slack_length(header(message)) <= HEADER_TEXT_MAX
        assert slack_length(message.text) <= FALLBACK_TEXT_MAX
        total = 0
        for block in message.blocks:
            if block["type"] == "section" and "text" in block:
                assert slack_length(block["text"]["text"]) <= SECTION_TEXT_MAX
            for item in block.get("fields", ()):
                assert slack_length(item["text"]) <= FIELD_TEXT_MAX
        total = sum(slack_length(t) for t in texts(message)) - slack_length(message.text)
        assert total <= TOTAL_BLOCK_TEXT_MAX
        assert "…" in header(message)
    # The message still says which link to open, however long the error was.
    assert messages[0].text.endswith(INCIDENT)


def test_clip_never_cuts_an_entity_in_half() -> None:
    assert clip("&amp;&amp;&amp;", 7) == "&amp;…"
    assert clip("ab&lt;", 5) == "ab…"
    assert clip("short", 5) == "short"


def test_clip_counts_astral_characters_as_slack_does() -> None:
    assert clip("😀" * 10, 5) == "😀😀…"
    assert slack_length("😀") == 2


def test_limit_problems_names_every_broken_limit() -> None:
    too_much = {
        "text": "x" * (FALLBACK_TEXT_MAX + 1),
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": "h" * 151}},
            {"type": "header", "text": {"type": "mrkdwn", "text": "h"}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "s" * 3001}},
            {"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11},
            {"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]},
            {"type": "section", "text": {"type": "mrkdwn", "text": ""}},
            {"type": "section"},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11},
            {"type": "image", "image_url": "https://x", "alt_text": "x"},
            {"type": "divider", "block_id": "b" * 256},
        ]
        + [{"type": "divider"}] * 41,
    }
    problems = "\n".join(limit_problems(too_much))
    for expected in [
        "text: 4001 characters, limit 4000",
        "blocks: 51 blocks, limit 50",
        "blocks[0].text: 151 characters, limit 150",
        "blocks[1].text: must be plain_text",
        "blocks[2].text: 3001 characters, limit 3000",
        "blocks[3].fields: 11 items, limit 10",
        "blocks[4].fields[0]: 2001 characters, limit 2000",
        "blocks[5].text: empty text",
        "blocks[6]: a section needs text or fields",
        "blocks[7].elements: 11 items",
        "blocks[8]: block type 'image' is not one we build",
        "blocks[9].block_id: longer than 255",
    ]:
        assert expected in problems
    with pytest.raises(MessageLimitError):
        check_limits(too_much)


def test_limit_problems_counts_the_total_block_text() -> None:
    sections = [{"type": "section", "text": {"type": "mrkdwn", "text": "s" * 3000}}] * 5
    assert limit_problems({"text": "x", "blocks": sections}) == [
        "blocks: 15000 characters in all, limit 12000"
    ]
    assert limit_problems({"text": "", "blocks": []}) == [
        "text: the plain-text fallback is missing"
    ]


def test_messages_are_accepted_by_a_strict_slack_stand_in(slack_server: FakeSlackServer) -> None:
    hostile = all_messages(tool=HOSTILE, reason=HOSTILE, actor=HOSTILE, last_error=HOSTILE)
    huge = all_messages(reason="x" * 100_000, last_error="y" * 100_000, tool="t" * 5000)
    messages = all_messages() + hostile + huge
    transport = SlackTransport(slack_server.webhook_url, timeout=2)
    for message in messages:
        transport.notify(message)  # a 400 invalid_blocks would raise

    received = slack_server.wait_for_requests(len(messages))
    assert [r.json for r in received] == [m.as_payload() for m in messages]
    assert all(r.reply.status == 200 for r in received)


# --- formatting and input checks -----------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (timedelta(milliseconds=500), "under 1s"),
        (timedelta(seconds=45), "45s"),
        (timedelta(minutes=22, seconds=4), "22m 4s"),
        (timedelta(minutes=22), "22m"),
        (timedelta(hours=1), "1h"),
        (timedelta(hours=3, minutes=5, seconds=59), "3h 5m"),
        (timedelta(days=2, hours=1, minutes=30), "2d 1h"),
    ],
)
def test_durations_read_naturally(delta: timedelta, expected: str) -> None:
    assert format_duration(delta) == expected


def test_money_has_two_decimals_and_thousands() -> None:
    assert format_usd(Decimal("1234.5")) == "$1,234.50"
    assert format_usd(Decimal("0")) == "$0.00"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: opened(since=datetime(2026, 1, 1)), "timezone-aware"),
        (lambda: opened(runs_affected=-1), "non-negative"),
        (lambda: opened(consecutive_failures=True), "non-negative"),
        (lambda: opened(state="opened"), "state must be one of"),
        (lambda: opened(tool="  "), "tool must be a non-empty"),
        (lambda: opened(workers="w1"), "not a string"),
        (lambda: closed(closed_at=SINCE - timedelta(seconds=1)), "before opened_at"),
        (lambda: closed(model_spend_usd=1.5), "finite Decimal"),
        (lambda: closed(model_spend_usd=Decimal("NaN")), "finite Decimal"),
        (lambda: closed(model_spend_usd=Decimal("-1")), "not be negative"),
        (lambda: manual(action="nuke"), "action must be one of"),
        (lambda: manual(reason=""), "reason must be a non-empty"),
        (lambda: manual(state_after="gone"), "state must be one of"),
        (lambda: flapping(window=timedelta(0)), "window must be positive"),
        (lambda: flapping(last_opened_at=SINCE - timedelta(1)), "before first_opened_at"),
    ],
)
def test_bad_input_gets_a_clear_error(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_closed_message_carries_the_outage_ledger_with_its_method_escaped() -> None:
    ledger = LedgerLine(
        discovery_runs=6,
        discovery_spend_usd=Decimal("7.20"),
        discovery_duration_s=2280.0,
        hidden_runs=334,
        spend_per_hidden_run_usd=Decimal("0.12"),
        avoided_usd=Decimal("360.50"),
        avoided_low_usd=Decimal("300.00"),
        avoided_high_usd=Decimal("372.00"),
        method=f"measured {HOSTILE}",
    )
    message = build_closed_message(closed(ledger=ledger))

    body = "\n".join(texts(message))
    assert "*Outage ledger*" in body
    assert "Hit the failing tool before it was hidden: 6 runs, $7.20 model spend, 38m" in body
    assert "Ran while it was hidden: 334 runs ($0.12 per run)." in body
    assert "*Spend avoided (estimate):* $360.50 (range $300.00 to $372.00)" in body
    assert "_Method:_ measured" in body
    assert "<!channel>" not in body and "&lt;!channel&gt;" in body
    assert message.text.endswith(INCIDENT) and "Spend avoided (estimate): $360.50." in message.text


def test_closed_message_without_an_estimate_says_why() -> None:
    ledger = LedgerLine(
        discovery_runs=0,
        discovery_spend_usd=Decimal(0),
        discovery_duration_s=0.0,
        hidden_runs=0,
        spend_per_hidden_run_usd=None,
        avoided_usd=None,
        avoided_low_usd=None,
        avoided_high_usd=None,
        method="no estimate: no priced model calls by step, or no step budget",
    )
    body = "\n".join(texts(build_closed_message(closed(ledger=ledger))))
    assert "Spend avoided" not in body and "no estimate" in body
