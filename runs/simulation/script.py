"""The scripted research model: what it does next, given what it has seen. Pure and seeded.

It behaves as the story says. With ``web_search`` offered and working it searches, reads,
searches, reads and answers (5 steps). With the tool offered but failing it re-phrases and tries
again, step after step, until the budget ends, then apologises. Told the tool is gone (it is not
in the tools array), it answers with what it has and admits the run is degraded.
"""

from __future__ import annotations

import random
from collections.abc import Set
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ("Action", "ResearchScript")

SEARCH = "web_search"
READ = "read_page"


class Action(StrEnum):
    SEARCH = "search"
    READ = "read"
    ANSWER = "answer"
    ANSWER_DEGRADED = "answer_degraded"
    GIVE_UP = "give_up"


@dataclass
class ResearchScript:
    step_budget: int
    rephrase_probability: float
    rng: random.Random
    results: int = 0
    pages_read: int = 0
    last_search_failed: bool = False
    history: list[Action] = field(default_factory=list)

    def next_action(self, *, step: int, offered: Set[str]) -> Action:
        action = self._decide(step=step, offered=offered)
        self.history.append(action)
        return action

    def _decide(self, *, step: int, offered: Set[str]) -> Action:
        if self.results >= 2 and self.pages_read >= 2:
            return Action.ANSWER
        if step >= self.step_budget:
            # The last step of the budget: the apology (or the answer, degraded if partial).
            return Action.GIVE_UP
        if SEARCH not in offered:
            return Action.ANSWER_DEGRADED
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
