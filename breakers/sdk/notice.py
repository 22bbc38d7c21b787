"""The notice the model reads alongside its reduced tools array.

It is resent on every step, so it stays short: one line per removed tool (its scope and last
error), one instruction to carry on with what remains and to admit it if the task needs the
missing tools, and one line per tool whose calls keep being rejected for their arguments.
Tools are listed by name so the same state always renders the same text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from breakers.sdk.core import Removal, SemanticStrike

__all__ = ["ERROR_CHARS", "render_notice", "shorten"]

ERROR_CHARS = 200

CARRY_ON = (
    "Continue with the tools that remain. If the task cannot be done without them, "
    "say so and report what you have."
)


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
    lines = ["These tools are removed for the rest of this run:"]
    for removal in ordered:
        lines.append(f"- {removal.tool} ({removal.scope} scope; {_why(removal)})")
    lines.append(CARRY_ON)
    return lines


def _why(removal: Removal) -> str:
    # An operator's kill switch has a reason but no error; a tripped breaker has both.
    if removal.last_error:
        return f"last error: {shorten(removal.last_error)}"
    return shorten(removal.reason)


def _strike_lines(strikes: Iterable[SemanticStrike]) -> list[str]:
    return [
        f"Change your approach with {strike.tool}: {strike.count} calls were rejected for "
        f"their arguments (last error: {shorten(strike.last_error)})."
        for strike in sorted(strikes, key=lambda strike: strike.tool)
    ]
