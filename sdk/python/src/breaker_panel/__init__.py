"""Agent-side breakers: the pure core an agent process imports (no Django, no I/O on the hot path).

    breaker = ToolBreaker()                       # run scope, THRESHOLD = 5
    tools = breaker.available(TOOLS)              # same shape, broken tools removed
    breaker.record_success(name) / breaker.record_failure(name, ToolFailure(...))
    text = breaker.notice()                       # None, or the text for the model

Worker scope: `WorkerBreakers()` once per process, then `worker.start_run()` per run for a
`RunBreakers` with the same calls. With the control plane: `ControlPlane(url, token=...,
worker_id=..., config=PlaneConfig(...))`. `classify(error)` says whether a failure counts towards
opening a breaker. Frameworks: `breaker_panel.integrations.*`. Everything else (tool shapes,
notices, scope sources) is in its submodule. The contract names: docs/api.md.
"""

from __future__ import annotations

from breaker_panel.classify import classify
from breaker_panel.client import ControlPlane, PlaneConfig, Run
from breaker_panel.core import DegradedResult, StepBudgetWarning, ToolBreaker, ToolFailure
from breaker_panel.result_checks import ResultChecker, ResultChecks
from breaker_panel.vocabulary import Outcome, RunStatus, Scope, State
from breaker_panel.worker import RunBreakers, WorkerBreakers

__all__ = [
    "ControlPlane",
    "DegradedResult",
    "Outcome",
    "PlaneConfig",
    "ResultChecker",
    "ResultChecks",
    "Run",
    "RunBreakers",
    "RunStatus",
    "Scope",
    "State",
    "StepBudgetWarning",
    "ToolBreaker",
    "ToolFailure",
    "WorkerBreakers",
    "classify",
]
