"""Test helpers for the SDK tests: a hand-driven clock, a transition recorder, tool arrays."""

from __future__ import annotations

from typing import Any

from breaker_panel import Scope, State


class FakeClock:
    """time.monotonic stand-in: time only moves when a test says so, so nothing sleeps."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class TransitionLog:
    """An `on_transition` callback that keeps what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Scope, State, State, str]] = []

    def __call__(
        self, tool: str, scope: Scope, old_state: State, new_state: State, reason: str
    ) -> None:
        self.calls.append((tool, scope, old_state, new_state, reason))

    def moves(self) -> list[tuple[str, str, str, str]]:
        """The calls without their reasons, as plain strings."""
        return [(tool, str(scope), str(old), str(new)) for tool, scope, old, new, _ in self.calls]


def chat_tools(*names: str) -> list[dict[str, Any]]:
    """Tools in the OpenAI Chat Completions shape."""
    return [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
        for name in names
    ]
