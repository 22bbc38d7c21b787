"""Fleet commands: agents' outcomes, probes and trial leases, operator actions, policy changes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from breakers.fleet.rules import AGENT_HOLDER_PREFIX, PROBE_HOLDER, OperatorActionKind
from breakers.fleet.store import AcquireResult
from breakers.fleet_service.errors import MAX_REASON_CHARS, FleetInputError, NotForcedError
from breakers.fleet_service.transitions import (
    epoch_ms,
    existing_tool,
    fleet_store,
    persist_transitions,
    policy_of,
    restore_tool,
    with_restore,
)
from breakers.models import (
    FleetTransition,
    OperatorAction,
    Probe,
    Tool,
    ToolPolicy,
    datetime_from_ms,
)
from breakers.observability.call_metrics import count_tool_calls
from breakers.probes.runner import run_probe
from runs.fleet_interface import AcceptedToolCall
from runs.models import AgentToken
from runs.models import Outcome as OutcomeChoice

logger = logging.getLogger(__name__)


# A probe's lease outlives its timeout by this much, so a live probe always reports inside it.
PROBE_LEASE_GRACE_SECONDS = 10.0


POLICY_FIELDS = frozenset(
    {
        "threshold",
        "cooldown_seconds",
        "max_cooldown_seconds",
        "min_workers",
        "probe_kind",
        "probe_url",
        "probe_method",
        "probe_expected_status",
        "probe_timeout_seconds",
        "probe_callable",
        "spend_amount_usd",
        "spend_window_seconds",
    }
)


# A blocked call never reached the vendor: the fleet has nothing to learn from it.
_FLEET_OUTCOMES = frozenset(
    {
        OutcomeChoice.SUCCESS.value,
        OutcomeChoice.RETRYABLE.value,
        OutcomeChoice.SEMANTIC.value,
        OutcomeChoice.DEGRADED.value,
    }
)


def fleet_record_tool_calls(
    *, calls: Iterable[AcceptedToolCall], now: datetime | None = None
) -> list[FleetTransition]:
    """Apply accepted ``tool.call`` outcomes to their tools' fleet breakers, in order.

    Called by ingest after its transaction committed (through the fleet updater the project
    wires, ``controlplane.wiring``). One script call per tool; resent event ids are recognised by
    Redis itself, so calls applied in part before a failure are not counted twice when they come
    back (from the ``FleetBacklog``).
    """
    calls = list(calls)
    # Prometheus (breakers.observability.call_metrics); a resent call was counted when it was
    # first applied.
    count_tool_calls(call for call in calls if not call.resent)
    fleet_calls = [call for call in calls if call.outcome in _FLEET_OUTCOMES]
    stale_before = _stale_before(tool_names={call.tool for call in fleet_calls})
    by_tool: dict[str, list[AcceptedToolCall]] = {}
    for call in fleet_calls:
        cutoff = stale_before.get(call.tool)
        if cutoff is not None and call.ts < cutoff:
            continue  # it happened before the breaker's last change: it must not undo it
        by_tool.setdefault(call.tool, []).append(call)
    if not by_tool:
        return []
    store, ms = fleet_store(), epoch_ms(now)
    rows: list[FleetTransition] = []
    for tool, tool_calls in by_tool.items():
        result = with_restore(tool, partial(store.apply, tool, tool_calls, now=ms))
        rows += persist_transitions(tool, result.transitions)
    return rows


def _stale_before(*, tool_names: set[str]) -> dict[str, datetime]:
    """Per tool, the time before which an outcome is stale: its last transition, less a margin
    for agents' clock skew.

    Outcomes arrive in arrival order, not in the order they happened: a client that backed off
    can deliver failures from an outage after a trial call has closed the breaker, and those
    would re-open a healthy tool. Applied after an open they change nothing anyway (late
    outcomes while open are ignored), so one rule covers every state.
    """
    if not tool_names:
        return {}
    margin = timedelta(seconds=settings.BREAKER_STALE_OUTCOME_SECONDS)
    rows = Tool.objects.filter(name__in=tool_names, since__isnull=False).values_list(
        "name", "since"
    )
    return {name: since - margin for name, since in rows if since is not None}


def fleet_probe(
    *, tool_name: str, window: int, clock: Callable[[], datetime] = timezone.now
) -> Probe | None:
    """Make the one probe of ``window`` if this call wins its lease; record it and apply it.

    None when there is nothing to do: the tool has no probe (any more), the window is over, or
    another probe holds the lease (a duplicated tick or task).
    """
    tool = Tool.objects.select_related("policy").filter(name=tool_name).first()
    policy = policy_of(tool) if tool is not None else None
    if tool is None or policy is None or not policy.probe_kind:
        return None
    store = fleet_store()
    ttl_ms = round((policy.probe_timeout_seconds + PROBE_LEASE_GRACE_SECONDS) * 1000)
    grant = with_restore(
        tool_name,
        lambda: store.acquire(
            tool_name, holder=PROBE_HOLDER, ttl_ms=ttl_ms, now=epoch_ms(clock()), window=window
        ),
    )
    if not grant.granted:
        return None
    started = clock()
    result = run_probe(policy)  # bounded by the policy's timeout, outside any transaction
    finished = clock()
    with transaction.atomic():
        probe = Probe.objects.create(
            tool=tool,
            window=grant.window,
            kind=policy.probe_kind,
            started_at=started,
            finished_at=finished,
            ok=result.ok,
            status_code=result.status_code,
            latency_ms=result.latency_ms,
            error=result.error,
        )
        tracked = store.finish_probe(
            tool_name, token=grant.token, ok=result.ok, now=epoch_ms(finished)
        )
        if tracked:
            Probe.objects.filter(pk=probe.pk).update(decided=True)
            probe.decided = True
        persist_transitions(tool_name, tracked, probe=probe, extra_cause={"probe": probe.pk})
    return probe


def fleet_trial_acquire(
    *, tool_name: str, worker_id: str, now: datetime | None = None
) -> AcquireResult:
    """The half-open trial lease for an agent worker (tools without a probe); one at a time."""
    existing_tool(tool_name)
    store = fleet_store()
    ttl_ms = round(settings.BREAKER_TRIAL_LEASE_SECONDS * 1000)
    return with_restore(
        tool_name,
        lambda: store.acquire(
            tool_name, holder=AGENT_HOLDER_PREFIX + worker_id, ttl_ms=ttl_ms, now=epoch_ms(now)
        ),
    )


def _clean_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise FleetInputError("a reason is required: say why, it is shown to everyone")
    if "\x00" in reason:
        raise FleetInputError("the reason holds a NUL character")
    if len(reason) > MAX_REASON_CHARS:
        raise FleetInputError(f"the reason is longer than {MAX_REASON_CHARS} characters")
    return reason


def _actor(user: User | None, token: AgentToken | None) -> str:
    if user is not None:
        return f"user:{user.get_username()}"
    if token is not None:
        return f"token:{token.name} ({token.display_prefix}…)"
    raise FleetInputError("an operator action needs a user or an operator token")


def fleet_operator_action(
    *,
    tool_name: str,
    action: OperatorActionKind,
    reason: str,
    user: User | None = None,
    token: AgentToken | None = None,
    via: str = "",
    now: datetime | None = None,
) -> OperatorAction:
    """Force open, force close, release or reset one tool fleet-wide, audited.

    ``via``: where it was done, when not on the dashboard or the API ("Slack (@alice)").

    Forced states override the automatic breaker until released; reset clears the automatic
    breaker's counters (and closes it) and leaves a forced state alone.
    """
    reason = _clean_reason(reason)
    tool = existing_tool(tool_name)
    actor = _actor(user, token)
    store, ms = fleet_store(), epoch_ms(now)
    applied = False
    try:
        with transaction.atomic():
            # The audit row first: if it cannot be written, Redis is never touched.
            row = OperatorAction.objects.create(
                tool=tool,
                action=action,
                reason=reason,
                at=datetime_from_ms(ms),
                user=user,
                token=token,
                actor=actor,
                via=via[:120],
                before={},
                after={},
            )
            result = with_restore(
                tool.name, lambda: store.operate(tool.name, action=action, reason=reason, now=ms)
            )
            if result is None:
                raise NotForcedError(f"{tool.name!r} is not forced: there is nothing to release")
            applied = True
            row.before, row.after = result.before.as_json(), result.after.as_json()
            row.save(update_fields=["before", "after"])
            # Redis has applied it: from here on nothing may undo the audit row. A failure to
            # record the transition is logged and left to the tick's reconcile (it records the
            # state Redis holds); answering 500 would tell the operator it did not happen.
            try:
                with transaction.atomic():
                    persist_transitions(
                        tool.name,
                        result.transitions,
                        operator_action=row,
                        extra_cause={"actor": actor, "operator_action": row.pk},
                    )
            except Exception:
                logger.exception(
                    "operator action %s on %r by %s is applied and audited, but its transition "
                    "was not recorded; the fleet tick reconciles it",
                    action.value,
                    tool.name,
                    actor,
                )
    except Exception:
        if applied:
            # Only a failed commit gets here: Redis has the action, the database has no audit
            # row for it. Never silent; the tick's reconcile records the state Redis holds.
            logger.error(
                "operator action %s on %r by %s (reason %r) was applied in Redis but its audit "
                "row was not committed",
                action.value,
                tool.name,
                actor,
                reason,
                exc_info=True,
            )
        raise
    return row


def tool_policy_update(
    *, tool_name: str, changes: Mapping[str, Any], actor: str, now: datetime | None = None
) -> ToolPolicy:
    """Change a tool's policy (validated as a whole) and push it to Redis."""
    unknown = set(changes) - POLICY_FIELDS
    if unknown:
        raise FleetInputError(f"unknown policy fields: {', '.join(sorted(unknown))}")
    tool = existing_tool(tool_name)
    with transaction.atomic():
        policy, _ = ToolPolicy.objects.select_for_update().get_or_create(tool=tool)
        for name, value in changes.items():
            setattr(policy, name, value)
        policy.updated_at, policy.updated_by = now or timezone.now(), actor
        policy.full_clean()  # ValidationError names each bad field
        policy.save()
        fleet_policy_sync(tool=tool, policy=policy)
        # Once more after the commit: a rebuild of Redis running meanwhile read the database
        # without this (uncommitted) policy and may have written the tool back without it.
        transaction.on_commit(lambda: fleet_policy_sync(tool=tool, policy=policy))
    return policy


def fleet_policy_sync(*, tool: Tool, policy: ToolPolicy | None) -> None:
    """Push a tool's policy to Redis (the admin calls it after saving one)."""
    # A blank policy's fields are all None: every value back to the settings default.
    overrides = (policy or ToolPolicy(tool=tool)).overrides()
    if not fleet_store().set_policy(tool.name, overrides):
        restore_tool(tool.name)
