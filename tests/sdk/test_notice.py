"""notice(): None while nothing is open; short, deterministic text for the model otherwise."""

from __future__ import annotations

from breaker_panel import Scope, ToolBreaker, ToolFailure
from breaker_panel.notice import ERROR_CHARS, Removal, SemanticStrike, render_notice, shorten

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


def test_notice_names_the_tool_and_last_error_without_breaker_words() -> None:
    breaker = ToolBreaker()
    trip(breaker, "web_search")
    text = breaker.notice()
    assert text is not None
    assert "- web_search: it keeps failing (last error: 503 from vendor)" in text
    for jargon in ("scope", "ToolFailure", "breaker", "cooldown", "trial", "half"):
        assert jargon not in text


def test_notice_tells_the_model_to_continue_and_to_admit_degradation() -> None:
    breaker = ToolBreaker()
    trip(breaker, "web_search")
    text = breaker.notice() or ""
    assert "Continue with the tools you have" in text
    assert "cannot be done without them, say so and report what you found" in text


def test_notice_exact_text_for_one_removed_tool() -> None:
    breaker = ToolBreaker()
    trip(breaker, "web_search")
    assert breaker.notice() == (
        "These tools are unavailable for the rest of this task:\n"
        "- web_search: it keeps failing (last error: 503 from vendor)\n"
        "Continue with the tools you have. If the task cannot be done without them, "
        "say so and report what you found."
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


def test_semantic_cap_tells_the_model_not_to_repeat_the_request() -> None:
    breaker = ToolBreaker()
    for _ in range(3):
        breaker.record_failure("lookup_order", BAD_ARGS)
    assert breaker.notice() == (
        "lookup_order: 3 calls got no usable answer (last: 400 unknown field 'sku'). "
        "Do not repeat the same request; if there is no answer, say so."
    )


def test_semantic_guidance_fits_no_results_as_well_as_bad_arguments() -> None:
    breaker = ToolBreaker()
    for _ in range(4):
        breaker.record_failure("lookup_order", ToolFailure("404 no such order", retryable=False))
    text = breaker.notice() or ""
    assert text.startswith("lookup_order: 4 calls got no usable answer (last: 404 no such order)")
    assert "arguments" not in text


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
    assert lines[-1].startswith("lookup_order: 3 calls got no usable answer")


def test_a_removed_tool_gets_no_semantic_line() -> None:
    breaker = ToolBreaker()
    for _ in range(3):
        breaker.record_failure("web_search", BAD_ARGS)
    trip(breaker, "web_search")
    assert "no usable answer" not in (breaker.notice() or "")


def test_notice_follows_the_latest_semantic_error() -> None:
    breaker = ToolBreaker()
    for _ in range(3):
        breaker.record_failure("lookup", BAD_ARGS)
    breaker.record_failure("lookup", ToolFailure("400 missing id", retryable=False))
    assert "400 missing id" in (breaker.notice() or "")


def test_an_operators_kill_switch_shows_the_operators_reason() -> None:
    removal = Removal(
        "web_search", Scope.FLEET, "forced open by an operator: vendor contract", forced=True
    )
    text = render_notice([removal], []) or ""
    assert "- web_search: switched off by an operator (vendor contract)" in text


def test_a_fleet_removal_without_an_error_never_shows_the_fleets_state_text() -> None:
    removal = Removal("web_search", Scope.FLEET, "cooldown of 30 s elapsed; one trial call")
    text = render_notice([removal], []) or ""
    assert "- web_search: failing for other agents right now" in text
    assert "cooldown" not in text and "trial" not in text


def test_render_notice_with_nothing_is_none() -> None:
    assert render_notice([], []) is None
    assert render_notice([], [SemanticStrike("x", 3, "e")]) is not None


def test_notice_stays_short() -> None:
    breaker = ToolBreaker()
    trip(breaker, "web_search", "e" * 5000)
    assert len(breaker.notice() or "") < 450
