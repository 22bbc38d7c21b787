"""The stand-in shows mrkdwn as Slack would, and never runs what a message carries."""

from __future__ import annotations

from scripts.slack_standin import render_mrkdwn, sign


def test_bold_code_links_and_dates() -> None:
    html = render_mrkdwn(
        "*web_search* is `open` <https://p.example/i/1?a=1&amp;b=2|Open the incident> "
        "since <!date^1764838800^{date_short_pretty} {time_secs}|2025-12-04 09:00:00 UTC>"
    )
    assert "<b>web_search</b>" in html
    assert "<code>open</code>" in html
    assert '<a href="https://p.example/i/1?a=1&amp;b=2" rel="noopener noreferrer">' in html
    assert ">Open the incident</a>" in html
    assert '<time datetime="2025-12-04T09:00:00+00:00">Dec 04, 09:00:00 UTC</time>' in html


def test_escaped_and_hostile_text_stays_text() -> None:
    html = render_mrkdwn(
        "&lt;script&gt;alert(1)&lt;/script&gt; <script>x()</script> <javascript:x|y>"
    )
    assert "<script>" not in html and "javascript:" not in html.replace("&lt;javascript:", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;javascript:x|y&gt;" in html


def test_code_is_not_styled_and_mentions_are_names() -> None:
    assert render_mrkdwn("`*not bold*`") == "<code>*not bold*</code>"
    assert render_mrkdwn("<!channel>") == "<b>@channel</b>"
    assert render_mrkdwn("<@U123|ana>") == "<b>@ana</b>"


def test_signature_is_slacks_v0_hmac() -> None:
    from slack_sdk.signature import SignatureVerifier

    body = b"payload=%7B%7D"
    signature = sign("secret", "1700000000", body)
    verifier = SignatureVerifier("secret")
    assert verifier.generate_signature(timestamp="1700000000", body=body) == signature
