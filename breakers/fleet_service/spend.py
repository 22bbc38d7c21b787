"""The spend rule's command: ingest's accepted model and tool calls, counted per run in Redis
(``breakers/fleet/lua/spend_run.lua``) and per tool (``spend.lua``), which may open a tool.
Why it is shaped so: docs/adr/0201-spend-rule-off-by-default.md."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial

from django.conf import settings

from breakers.fleet.rules import micro_usd
from breakers.fleet.store import RunSpend
from breakers.fleet_service.transitions import (
    epoch_ms,
    fleet_store,
    persist_transitions,
    with_restore,
)
from breakers.models import FleetTransition
from runs.fleet_interface import AcceptedModelCall, AcceptedToolCall
from runs.models import Outcome

__all__ = ("fleet_record_spend",)


def fleet_record_spend(
    *,
    tool_calls: Sequence[AcceptedToolCall],
    model_calls: Sequence[AcceptedModelCall],
    now: datetime | None = None,
) -> list[FleetTransition]:
    """Count the model spend of runs whose calls to a tool have all failed so far (any outcome
    but ``success`` and ``blocked``) towards that tool, and record the openings it causes.

    Two round trips when the rule is on for some tool (one pipelined script per run of the
    batch, then one per tool whose count changed); one (reading which tools have it) when it is
    on for none. Every model call is keyed by its ledger id in Redis, so a resent batch adds
    nothing twice.
    """
    if not tool_calls and not model_calls:
        return []
    store = fleet_store()
    enabled = store.spend_enabled_tools()
    if enabled is not None and not enabled:
        return []
    runs = _runs(tool_calls=tool_calls, model_calls=model_calls, enabled=enabled)
    if not runs:
        return []
    ms = epoch_ms(now)
    margin_ms = round(settings.BREAKER_STALE_OUTCOME_SECONDS * 1000)
    rows: list[FleetTransition] = []
    for tool, ops in store.spend_runs(runs, now=ms).items():
        if enabled is not None and tool not in enabled:
            continue  # its policy turned the rule off since this run's first failure
        result = with_restore(
            tool, partial(store.spend_apply, tool, ops, now=ms, stale_margin_ms=margin_ms)
        )
        rows += persist_transitions(tool, result.transitions)
    return rows


def _runs(
    *,
    tool_calls: Sequence[AcceptedToolCall],
    model_calls: Sequence[AcceptedModelCall],
    enabled: set[str] | None,
) -> dict[str, RunSpend]:
    runs: dict[str, RunSpend] = {}
    for model in model_calls:
        run = runs.get(model.run_key)
        if run is None:
            run = runs[model.run_key] = RunSpend(model.voter, [], [])
        key = model.dedupe_id or model.event_id
        run.model_calls.append((key, epoch_ms(model.ts), micro_usd(model.cost_usd)))
    for call in tool_calls:
        if not call.run_key or call.outcome == Outcome.BLOCKED:
            continue  # a refusal never reached the vendor: it says nothing of the tool
        if enabled is not None and call.tool not in enabled:
            continue
        run = runs.get(call.run_key)
        if run is None:
            run = runs[call.run_key] = RunSpend(call.worker_id, [], [])
        run.tool_outcomes.append((call.tool, call.outcome == Outcome.SUCCESS))
    return runs
