"""What one breaker mode of one outage replay measured, read from its ``OutageReplay`` row: the
result ``play_outage`` returns and the pages read."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from breakers.replay.scenario import Scenario
from runs.models import OutageReplay

__all__ = ("ReplayResult", "batch_label")


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _table(value: Any) -> dict[int, float]:
    """A ``{"<steps>": dollars}`` table as recorded; entries that do not parse are left out."""
    table = {}
    for key, item in value.items() if isinstance(value, dict) else ():
        usd = _number(item)
        if str(key).isdigit() and usd is not None:
            table[int(key)] = usd
    return dict(sorted(table.items()))


def batch_label(replay: OutageReplay) -> str | None:
    """The invocation a replay belongs to (every mode of one command shares it); None in rows
    older than the label."""
    record = replay.scenario if isinstance(replay.scenario, dict) else {}
    label = record.get("batch")
    return None if label is None else str(label)


@dataclass(frozen=True)
class ReplayResult:
    """One mode of one replay: the command's figures over the runs started in the outage window
    (simulated seconds), the story it played and who played it. The row is written by the
    replay and may be older than this code, or corrupt: a figure that is missing or does not
    parse reads as None (or an empty table)."""

    mode: str
    agent: str  # who played the runs: "hand-written" or "pydantic-ai"
    batch: str | None  # the invocation it belongs to (every mode of one command shares it)
    scenario: Scenario
    wrap_up_steps: int | None  # None: the replay predates --wrap-up-steps
    figures: Mapping[str, Any]  # the summary as recorded; {} while it plays or if it failed

    @classmethod
    def of(cls, replay: OutageReplay) -> ReplayResult:
        record = replay.scenario if isinstance(replay.scenario, dict) else {}
        steps = _number(record.get("wrap_up_steps"))
        return cls(
            mode=replay.mode,
            agent=str(record.get("agent") or "hand-written"),
            batch=batch_label(replay),
            scenario=Scenario.from_record(record),
            wrap_up_steps=None if steps is None else int(steps),
            figures=replay.summary if isinstance(replay.summary, dict) else {},
        )

    def number(self, name: str) -> float | None:
        """One figure of the summary (``runs``, ``model_spend_usd``...), None when it has none."""
        return _number(self.figures.get(name))

    @property
    def runs(self) -> float | None:
        return self.number("runs")

    @property
    def model_spend_usd(self) -> float | None:
        return self.number("model_spend_usd")

    @property
    def mean_run_duration_s(self) -> float | None:
        return self.number("mean_run_duration_s")

    @property
    def web_search_calls(self) -> float | None:
        """Calls sent to the vendor while it was down, by every run of the replay."""
        return self.number("web_search_calls")

    @property
    def window_vendor_calls(self) -> float | None:
        """The calls the comparison bars show: by the runs started in the window where the
        replay recorded those (some older replays did), else ``web_search_calls``."""
        in_window = "web_search_calls_in_window" in self.figures
        return self.number("web_search_calls_in_window" if in_window else "web_search_calls")

    @property
    def http_attempts(self) -> float | None:
        return self.number("http_attempts")

    @property
    def paused_real_s(self) -> float | None:
        return self.number("paused_real_s")

    @property
    def spend_by_wrap_up_steps(self) -> dict[int, float]:
        """The window's spend re-priced for N wrap-up steps, by N."""
        return _table(self.figures.get("spend_by_wrap_up_steps"))

    @property
    def floor_spend_by_wrap_up_steps(self) -> dict[int, float]:
        """The least the window's runs could cost had each lost the tool at once, by N."""
        return _table(self.figures.get("floor_spend_by_wrap_up_steps"))

    @property
    def caching(self) -> dict[str, dict[str, Any]]:
        """With prompt caching on, per provider ("anthropic", "openai"): spend priced with its
        cache rates, the cached-input share before and during the outage, and the caching rule
        in words (``breakers.replay.caching.cache_summary``); {} in replays older than it."""
        value = self.figures.get("caching")
        if not isinstance(value, dict):
            return {}
        return {str(k): dict(v) for k, v in value.items() if isinstance(v, dict)}
