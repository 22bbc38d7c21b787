"""Outcomes, ToolFailure and how record_failure() classifies what it is given."""

from __future__ import annotations

import pytest

from breaker_panel import Outcome, Scope, State, ToolFailure
from breaker_panel.core import describe_failure


def test_outcome_values_are_the_contract_strings() -> None:
    assert [str(o) for o in Outcome] == ["success", "retryable", "semantic", "degraded", "blocked"]
    as_text: str = Outcome.RETRYABLE  # a StrEnum: usable wherever the contract wants a str
    assert as_text == "retryable"


def test_state_and_scope_values_are_the_contract_strings() -> None:
    assert {str(s) for s in State} == {
        "closed",
        "open",
        "half_open",
        "forced_open",
        "forced_closed",
    }
    assert [str(s) for s in Scope] == ["run", "worker", "fleet"]


def test_tool_failure_keeps_message_retryable_and_attempts() -> None:
    failure = ToolFailure("503 from vendor", retryable=True, attempts=5)
    assert isinstance(failure, Exception)
    assert (failure.message, failure.retryable, failure.attempts) == ("503 from vendor", True, 5)
    assert str(failure) == "503 from vendor"
    assert failure.outcome is Outcome.RETRYABLE


def test_tool_failure_defaults_to_one_retryable_attempt() -> None:
    failure = ToolFailure("timeout")
    assert (failure.retryable, failure.attempts) == (True, 1)


def test_tool_failure_not_retryable_is_semantic() -> None:
    assert ToolFailure("400 bad field", retryable=False).outcome is Outcome.SEMANTIC


def test_tool_failure_rejects_zero_attempts() -> None:
    with pytest.raises(ValueError, match="attempts"):
        ToolFailure("x", attempts=0)


def test_tool_failure_can_be_raised_and_caught() -> None:
    with pytest.raises(ToolFailure) as caught:
        raise ToolFailure("503", retryable=True, attempts=3)
    assert caught.value.attempts == 3


def test_describe_tool_failure_uses_the_event_error_format() -> None:
    info = describe_failure(ToolFailure("503 from vendor", retryable=True, attempts=5))
    assert info == (Outcome.RETRYABLE, "ToolFailure: 503 from vendor", 5)


def test_describe_plain_exception_is_retryable_with_its_type() -> None:
    info = describe_failure(ConnectionError("reset by peer"))
    assert info == (Outcome.RETRYABLE, "ConnectionError: reset by peer", 1)


def test_describe_exception_without_message_names_its_type() -> None:
    assert describe_failure(TimeoutError()).error == "TimeoutError"


def test_describe_string_and_none_never_raise() -> None:
    assert describe_failure("vendor down") == (Outcome.RETRYABLE, "vendor down", 1)
    assert describe_failure(None) == (Outcome.RETRYABLE, "unknown error", 1)
