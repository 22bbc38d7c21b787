"""Agent-side breakers: the pure core an agent process imports (no Django, no I/O on the hot path).

    breaker = ToolBreaker()                       # run scope, THRESHOLD = 5
    tools = breaker.available(TOOLS)              # same shape, broken tools removed
    breaker.record_success(name) / breaker.record_failure(name, ToolFailure(...))
    text = breaker.notice()                       # None, or the text for the model

Worker scope: `WorkerBreakers()` once per process, then `worker.start_run()` per run for a
`RunBreakers` with the same calls. `classify(error)` says whether a failure counts towards
opening a breaker. Frameworks: `breaker_panel.integrations.*`. The contract names: docs/api.md.
"""

from __future__ import annotations

from breaker_panel.classify import Classifier, classify
from breaker_panel.client import ControlPlane, Run
from breaker_panel.core import (
    BUDGET_FRACTION_LIMIT,
    FailureInfo,
    Removal,
    SemanticStrike,
    StepBudgetWarning,
    ToolBreaker,
    ToolFailure,
    TransitionCallback,
    check_step_budget,
    describe_failure,
    step_budget_fraction,
)
from breaker_panel.toolsets import filter_tools, tool_name
from breaker_panel.vocabulary import Outcome, RunStatus, Scope, State
from breaker_panel.worker import (
    ExternalScope,
    RunBreakers,
    ScopeSource,
    ScopeState,
    TrialLease,
    WorkerBreakers,
)

__all__ = [
    "BUDGET_FRACTION_LIMIT",
    "Classifier",
    "ControlPlane",
    "ExternalScope",
    "FailureInfo",
    "Outcome",
    "Removal",
    "Run",
    "RunBreakers",
    "RunStatus",
    "Scope",
    "ScopeSource",
    "ScopeState",
    "SemanticStrike",
    "State",
    "StepBudgetWarning",
    "ToolBreaker",
    "ToolFailure",
    "TransitionCallback",
    "TrialLease",
    "WorkerBreakers",
    "check_step_budget",
    "classify",
    "describe_failure",
    "filter_tools",
    "step_budget_fraction",
    "tool_name",
]
