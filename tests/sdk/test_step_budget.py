"""The step-budget fraction: threshold / step budget, with a warning above 25%."""

from __future__ import annotations

import warnings
from fractions import Fraction

import pytest

from breaker_panel import StepBudgetWarning, ToolBreaker
from breaker_panel.core import BUDGET_FRACTION_LIMIT, check_step_budget, step_budget_fraction


def test_fraction_is_threshold_over_budget() -> None:
    assert step_budget_fraction(5, 20) == Fraction(1, 4)
    assert step_budget_fraction(3, 30) == Fraction(1, 10)


def test_twenty_steps_with_threshold_five_is_at_the_limit_not_above() -> None:
    assert step_budget_fraction(5, 20) == BUDGET_FRACTION_LIMIT
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_step_budget(5, 20) is False


def test_above_the_limit_warns_and_returns_true() -> None:
    with pytest.warns(StepBudgetWarning, match="threshold 5 is 33% of a 15-step budget"):
        assert check_step_budget(5, 15) is True


def test_a_budget_below_one_step_is_rejected() -> None:
    with pytest.raises(ValueError, match="step_budget"):
        step_budget_fraction(5, 0)


def test_tool_breaker_checks_its_step_budget() -> None:
    with pytest.warns(StepBudgetWarning):
        breaker = ToolBreaker(step_budget=10)
    assert breaker.budget_warning is True


def test_tool_breaker_within_budget_has_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ToolBreaker(step_budget=20).budget_warning is False
        assert ToolBreaker().budget_warning is False


def test_a_lower_threshold_fits_a_short_budget() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ToolBreaker(threshold=2, step_budget=8).budget_warning is False
