"""notice(): None while nothing is open; short, deterministic text for the model otherwise."""

from __future__ import annotations

from breakers.sdk import Removal, Scope, SemanticStrike, ToolBreaker, ToolFailure
from breakers.sdk.notice import ERROR_CHARS, render_notice, shorten

BAD_ARGS = ToolFailure("400 unknown field 'sku'", retryable=False)


def trip(breaker: ToolBreaker, name: str, message: str = "503 from vendor") -> None:
    for _ in range(breaker.threshold):
        breaker.record_failure(name, ToolFailure(message, retryable=True, attempts=5))


def test_notice_is_none_while_nothing_is_open() -> None:
    breaker = ToolBreaker()
    assert breaker.notice() is None
    for _ in range(4):
        breaker.record_failure("web_search", ToolFailure("503"))
    assert breaker.notice() is None


def test_notice_names_the_tool_its_scope_and_last_error() -> None:
    breaker = ToolBreaker()
    trip(breaker, "web_search")
    text = breaker.notice()
    assert text is not None
    assert "- web_search (run scope; last error: ToolFailure: 503 from vendor)" in text


def test_notice_tells_the_model_to_continue_and_to_admit_degradation() -> None:
    breaker = ToolBreaker()
    trip(breaker, "web_search")
    text = breaker.notice() or ""
    assert "Continue with the tools that remain" in text
    assert "cannot be done without them, say so and report what you have" in text


def test_notice_exact_text_for_one_removed_tool() -> None:
    breaker = ToolBreaker()
    trip(breaker, "web_search")
    assert breaker.notice() == (
        "These tools are removed for the rest of this run:\n"
        "- web_search (run scope; last error: ToolFailure: 503 from vendor)\n"
        "Continue with the tools that remain. If the task cannot be done without them, "
        "say so and report what you have."
    )


def test_notice_lists_tools_by_name_whatever_the_order_they_opened() -> None:
    first, second = ToolBreaker(), ToolBreaker()
    trip(first, "zeta")
    trip(first, "alpha")
    trip(second, "alpha")
    trip(second, "zeta")
    assert first.notice() == second.notice()
    text = first.notice() or ""
    assert text.index("- alpha") < text.index("- zeta")


def test_long_errors_are_truncated_to_one_short_line() -> None:
    breaker = ToolBreaker()
    trip(breaker, "web_search", "line one\nline two " + "x" * 1000)
    text = breaker.notice() or ""
    line = next(line for line in text.splitlines() if line.startswith("- web_search"))
    assert "line one line two" in line
    assert line.endswith("…)")
    assert len(line) < ERROR_CHARS + 60


def test_shorten_keeps_short_text_and_cuts_long_text() -> None:
    assert shorten("a  b\n c") == "a b c"
    assert shorten("x" * 300) == "x" * 199 + "…"
    assert len(shorten("x" * 300, 10)) == 10


def test_semantic_cap_tells_the_model_to_change_its_approach() -> None:
    breaker = ToolBreaker()
    for _ in range(3):
        breaker.record_failure("lookup_order", BAD_ARGS)
    assert breaker.notice() == (
        "Change your approach with lookup_order: 3 calls were rejected for their arguments "
        "(last error: ToolFailure: 400 unknown field 'sku')."
    )


def test_semantic_below_the_cap_says_nothing() -> None:
    breaker = ToolBreaker()
    for _ in range(2):
        breaker.record_failure("lookup_order", BAD_ARGS)
    assert breaker.notice() is None


def test_notice_combines_removed_tools_and_semantic_strikes() -> None:
    breaker = ToolBreaker()
    trip(breaker, "web_search")
    for _ in range(3):
        breaker.record_failure("lookup_order", BAD_ARGS)
    lines = (breaker.notice() or "").splitlines()
    assert lines[1].startswith("- web_search")
    assert lines[-1].startswith("Change your approach with lookup_order")


def test_a_removed_tool_gets_no_semantic_line() -> None:
    breaker = ToolBreaker()
    for _ in range(3):
        breaker.record_failure("web_search", BAD_ARGS)
    trip(breaker, "web_search")
    assert "Change your approach" not in (breaker.notice() or "")


def test_notice_follows_the_latest_semantic_error() -> None:
    breaker = ToolBreaker()
    for _ in range(3):
        breaker.record_failure("lookup", BAD_ARGS)
    breaker.record_failure("lookup", ToolFailure("400 missing id", retryable=False))
    assert "400 missing id" in (breaker.notice() or "")


def test_removal_without_an_error_shows_its_reason() -> None:
    removal = Removal("web_search", Scope.FLEET, "forced open by an operator: vendor contract")
    text = render_notice([removal], []) or ""
    assert "- web_search (fleet scope; forced open by an operator: vendor contract)" in text


def test_render_notice_with_nothing_is_none() -> None:
    assert render_notice([], []) is None
    assert render_notice([], [SemanticStrike("x", 3, "e")]) is not None


def test_notice_stays_short() -> None:
    breaker = ToolBreaker()
    trip(breaker, "web_search", "e" * 5000)
    assert len(breaker.notice() or "") < 450
