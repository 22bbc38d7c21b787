"""The notice the model reads alongside its reduced tools array.

Written for a model, not an operator: what is gone and why in plain words, then what to do.
No scopes, breaker states, cooldowns or trials (the pages show those). It is resent on every
step, so it stays short. Tools are listed by name so the same state always renders the same
text. Examples before and after: docs/adr/0121-the-notice-is-written-for-a.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from breaker_panel.classify import DEGRADED_PREFIX
from breaker_panel.vocabulary import Scope

__all__ = [
    "CARRY_ON",
    "ERROR_CHARS",
    "FAILING_ELSEWHERE",
    "NO_REPEAT",
    "Removal",
    "SemanticStrike",
    "render_notice",
    "shorten",
]


@dataclass(frozen=True, slots=True)
class Removal:
    """Why a tool is out of the tools array: which scope removed it, when, and its last error."""

    tool: str
    scope: Scope
    reason: str  # "5 consecutive retryable failures", or an operator's reason
    last_error: str = ""
    since: float = 0.0  # the clock of whoever removed it
    forced: bool = False  # an operator's kill switch: `reason` is theirs


@dataclass(frozen=True, slots=True)
class SemanticStrike:
    """A tool whose calls keep being rejected for their arguments, in one run."""

    tool: str
    count: int
    last_error: str


ERROR_CHARS = 200

HEADER = "These tools are unavailable for the rest of this task:"
CARRY_ON = (
    "Continue with the tools you have. If the task cannot be done without them, "
    "say so and report what you found."
)
# A fleet removal this run has no error of its own for: the fleet's reason is breaker state
# ("5 failures from 2 workers", "cooldown elapsed"), and another agent's error text is not
# this run's to read.
FAILING_ELSEWHERE = "failing for other agents right now"
OPERATOR = "switched off by an operator"
NO_REPEAT = "Do not repeat the same request; if there is no answer, say so."
_OPERATOR_PREFIXES = ("forced open by an operator:", "forced open:")
_FAILURE_PREFIX = "ToolFailure: "


def shorten(text: str, limit: int = ERROR_CHARS) -> str:
    """One line of at most `limit` characters: error text must not reshape the notice."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def render_notice(removals: Iterable[Removal], strikes: Iterable[SemanticStrike]) -> str | None:
    """The text for the model, or None when there is nothing to say."""
    lines = _removal_lines(removals) + _strike_lines(strikes)
    return "\n".join(lines) if lines else None


def _removal_lines(removals: Iterable[Removal]) -> list[str]:
    ordered = sorted(removals, key=lambda removal: removal.tool)
    if not ordered:
        return []
    lines = [HEADER]
    lines.extend(f"- {removal.tool}: {_why(removal)}" for removal in ordered)
    lines.append(CARRY_ON)
    return lines


def _why(removal: Removal) -> str:
    if removal.forced:
        reason = removal.reason
        for prefix in _OPERATOR_PREFIXES:
            reason = reason.removeprefix(prefix)
        reason = shorten(reason)
        return (
            f"switched off by an operator ({reason})" if reason else "switched off by an operator"
        )
    if removal.last_error.startswith(DEGRADED_PREFIX):
        # A result check's reason is already written for the model: "returns empty results
        # for every query" reads as "- web_search: it returns empty results for every query".
        return f"it {shorten(removal.last_error.removeprefix(DEGRADED_PREFIX))}"
    if removal.last_error:
        return f"it keeps failing (last error: {_error(removal.last_error)})"
    return FAILING_ELSEWHERE


def _error(text: str) -> str:
    return shorten(text.removeprefix(_FAILURE_PREFIX).removeprefix(DEGRADED_PREFIX))


def _strike_lines(strikes: Iterable[SemanticStrike]) -> list[str]:
    return [
        f"{strike.tool}: {strike.count} calls got no usable answer "
        f"(last: {_error(strike.last_error)}). {NO_REPEAT}"
        for strike in sorted(strikes, key=lambda strike: strike.tool)
    ]
