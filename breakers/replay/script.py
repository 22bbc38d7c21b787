"""The scripted research model: what it does next, given what it is sent. Pure and seeded.

It decides from the two things a real model reads: the tools array of this step and the notice
(if any). With ``web_search`` offered and working it searches, reads, searches, reads and answers
(5 steps). With the tool offered but failing (or refused) it re-phrases and tries again, step
after step, until the budget ends, then apologises. When the tool is missing from the tools
array, or the notice says it is gone, it stops asking for it and takes ``wrap_up_steps`` model
calls to finish with what it has, admitting the run is degraded. When the tool stays in the tools
array although the notice says it is gone (the ``refuse`` way), it asks for it anyway on
``ignores_notice_probability`` of its steps (an assumption: a model obeys a notice less surely
than a missing tool); each such call is refused and costs it one more step.
"""

from __future__ import annotations

import random
import re
from collections.abc import Set
from dataclasses import dataclass, field
from enum import StrEnum

from breaker_panel.notice import HEADER as NOTICE_HEADER

__all__ = ("Action", "ResearchScript", "tools_the_notice_removes")

SEARCH = "web_search"
READ = "read_page"
# The SDK's notice lists each removed tool as "- <name>: <why>" under its header
# (sdk/python/src/breaker_panel/notice.py); the model reads those lines, nothing else of it.
_REMOVED_LINE = re.compile(r"- (\S+?): ")


def tools_the_notice_removes(notice: str | None) -> frozenset[str]:
    """The tool names a notice says are gone for the rest of the run."""
    names: set[str] = set()
    lines = iter((notice or "").splitlines())
    for line in lines:
        if line == NOTICE_HEADER:
            for item in lines:
                if (match := _REMOVED_LINE.match(item)) is None:
                    break
                names.add(match.group(1))
    return frozenset(names)


class Action(StrEnum):
    SEARCH = "search"
    READ = "read"
    WRAP_UP = "wrap_up"  # a model call with no tool call: it works with what it has
    ANSWER = "answer"
    ANSWER_DEGRADED = "answer_degraded"
    GIVE_UP = "give_up"


@dataclass
class ResearchScript:
    step_budget: int
    rephrase_probability: float
    rng: random.Random
    # Model calls it takes to finish once the tool is gone (1: it answers on that same step).
    wrap_up_steps: int = 1
    ignores_notice_probability: float = 0.0
    results: int = 0
    pages_read: int = 0
    last_search_failed: bool = False
    wrap_up_started_at: int | None = None  # the step at which it stopped asking for the tool
    hidden_calls: int = 0  # calls of the tool after the notice said it was gone
    history: list[Action] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.wrap_up_steps < 1:
            raise ValueError("wrap_up_steps must be at least 1")

    def next_action(self, *, step: int, offered: Set[str], notice: str | None = None) -> Action:
        """The model's next move, given this step's tools array and notice."""
        action = self._decide(step=step, offered=offered, notice=notice)
        self.history.append(action)
        return action

    def _decide(self, *, step: int, offered: Set[str], notice: str | None) -> Action:
        if self.results >= 2 and self.pages_read >= 2:
            return Action.ANSWER
        if step >= self.step_budget:
            # The last step of the budget: the apology (or the answer, degraded if partial).
            return Action.GIVE_UP
        searchable = SEARCH in offered and SEARCH not in tools_the_notice_removes(notice)
        if self.wrap_up_started_at is None and not searchable:
            self.wrap_up_started_at = step
        if self.wrap_up_started_at is not None:
            if SEARCH in offered and self.rng.random() < self.ignores_notice_probability:
                # Still in the tools array: the model asks for it despite the notice.
                self.hidden_calls += 1
                return Action.SEARCH
            # Once told the tool is gone it stays gone for this run (the SDK's rule too).
            done = step - self.wrap_up_started_at + 1 - self.hidden_calls >= self.wrap_up_steps
            return Action.ANSWER_DEGRADED if done else Action.WRAP_UP
        if self.results > self.pages_read:
            return Action.READ
        if self.last_search_failed and self.rng.random() >= self.rephrase_probability:
            return Action.READ  # re-reads a page it knows instead of searching again
        return Action.SEARCH

    def search_succeeded(self) -> None:
        self.results += 1
        self.last_search_failed = False

    def search_failed(self) -> None:
        self.last_search_failed = True

    def page_read(self) -> None:
        if self.results > self.pages_read:
            self.pages_read += 1
