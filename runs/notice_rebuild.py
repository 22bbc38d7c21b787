"""The notice the model saw, rebuilt from what the run reported, in the SDK's own words.

Agents do not report the notice text itself. What they do report is enough to rebuild it: every
removal (a ``breaker.transition`` to open or forced open, with its scope and reason) and every
tool call (for the last error, and for semantic strikes). Replaying them in order through
``breaker_panel.notice.render_notice`` gives the text the model was sent with each model call,
as long as the agent ran the SDK's default semantic cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from breaker_panel import Scope, ToolBreaker
from breaker_panel.notice import Removal, SemanticStrike, render_notice
from runs.models import FAILED_OUTCOMES, BreakerState, Outcome, ReportedTransition, ToolCall

REMOVING_STATES = frozenset({BreakerState.OPEN, BreakerState.FORCED_OPEN})


@dataclass
class NoticeReplay:
    """The run's notice state as its steps are replayed one by one."""

    semantic_cap: int = ToolBreaker.SEMANTIC_CAP
    removals: dict[str, Removal] = field(default_factory=dict)
    strikes: dict[str, SemanticStrike] = field(default_factory=dict)
    last_errors: dict[str, str] = field(default_factory=dict)

    def tool_call(self, call: ToolCall) -> None:
        if call.outcome == Outcome.SUCCESS:
            # A success clears the semantic counter: the model found a way to call the tool.
            self.strikes.pop(call.tool, None)
        elif call.outcome == Outcome.SEMANTIC:
            previous = self.strikes.get(call.tool)
            count = (previous.count if previous else 0) + 1  # counted past the cap, as the SDK
            self.strikes[call.tool] = SemanticStrike(call.tool, count, call.error)
        elif call.outcome in FAILED_OUTCOMES:
            self.last_errors[call.tool] = call.error

    def transition(self, transition: ReportedTransition) -> None:
        # A tool removed from a run stays removed, whatever its breaker does afterwards.
        if transition.state not in REMOVING_STATES or transition.tool in self.removals:
            return
        try:
            scope = Scope(transition.scope)
        except ValueError:
            return  # ingest validates scopes; an unknown one cannot be worded as the SDK would
        # An operator's kill switch has a reason but no error; a tripped breaker has both.
        # Runs report a fleet kill switch as "open" with the operator's reason.
        forced = transition.state == BreakerState.FORCED_OPEN or (
            scope is Scope.FLEET and transition.reason.startswith("forced open")
        )
        self.removals[transition.tool] = Removal(
            tool=transition.tool,
            scope=scope,
            reason=transition.reason,
            last_error="" if forced else self.last_errors.get(transition.tool, ""),
            forced=forced,
        )

    def text(self) -> str | None:
        capped = (
            strike
            for strike in self.strikes.values()
            if strike.count >= self.semantic_cap and strike.tool not in self.removals
        )
        return render_notice(self.removals.values(), capped)
