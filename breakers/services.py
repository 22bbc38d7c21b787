"""Fleet breaker services: the Django shell around the Redis store (``breakers/fleet/store.py``).

Redis decides (one atomic script per step, shared by every web process and Celery worker); the
database records: each transition the scripts report becomes a ``FleetTransition`` row and
updates the ``Tool`` row that mirrors the state, in one transaction, and opens or closes the
tool's ``Incident``. When a script finds no state for a tool (its first event, or Redis lost its
data) the tool is restored from the database before the step is applied, and a missing
generation key makes the whole fleet be rebuilt, so a broken tool is never re-admitted silently.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache, partial
from typing import Any, Protocol

import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from breakers.alerts import alerts_for_fleet_changes
from breakers.fleet import rules
from breakers.fleet.rules import (
    AGENT_HOLDER_PREFIX,
    OUT_STATES,
    PROBE_HOLDER,
    CauseKind,
    FleetPolicy,
    OperatorActionKind,
    Transition,
    TrialMode,
)
from breakers.fleet.store import (
    AcquireResult,
    FleetStore,
    Missing,
    OutcomeEvent,
    ToolState,
    TrackedTransition,
    redis_client,
)
from breakers.models import (
    FleetTransition,
    Incident,
    OperatorAction,
    Probe,
    Tool,
    ToolPolicy,
    datetime_from_ms,
    datetime_to_ms,
    default_policy,
    ms_to_datetime,
)
from breakers.probes import run_probe
from breakers.sdk.core import State
from runs.models import AgentToken
from runs.models import Outcome as OutcomeChoice

__all__ = [
    "FLEET_STORE_ERRORS",
    "FleetCall",
    "FleetError",
    "FleetInputError",
    "FleetView",
    "NotForcedError",
    "UnknownToolError",
    "fleet_operator_action",
    "fleet_policy_sync",
    "fleet_probe",
    "fleet_rebuild",
    "fleet_record_tool_calls",
    "fleet_state",
    "fleet_state_from_database",
    "fleet_store",
    "fleet_tick",
    "fleet_tool_details",
    "fleet_trial_acquire",
    "tool_policy_update",
]

logger = logging.getLogger(__name__)

MAX_REASON_CHARS = 1000
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
    }
)


class FleetError(Exception):
    """A fleet request that cannot be done as asked; the message says why."""


class UnknownToolError(FleetError):
    pass


class FleetInputError(FleetError):
    pass


class NotForcedError(FleetError, rules.NotForcedError):
    """Release of a tool that is not forced (the reference model raises its base class)."""


class FleetCall(Protocol):
    """What the fleet needs of an accepted ``tool.call`` (``runs.services.AcceptedToolCall``)."""

    @property
    def event_id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def worker_id(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def trial(self) -> bool: ...
    @property
    def dedupe_id(self) -> str: ...
    @property
    def ts(self) -> datetime: ...


# -- the store -------------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _redis_client(url: str, timeout: float) -> redis.Redis:
    # One pool per process. A slow or dead Redis fails the request within the timeout (ingest
    # answers 503 and the agent resends) instead of hanging it.
    return redis_client(url, timeout=timeout)


@lru_cache(maxsize=4)
def _store(url: str, timeout: float, defaults: FleetPolicy, dedupe_ttl_ms: int) -> FleetStore:
    return FleetStore(_redis_client(url, timeout), defaults=defaults, dedupe_ttl_ms=dedupe_ttl_ms)


def fleet_store() -> FleetStore:
    """The process's store, built from settings (rebuilt if a test overrides them)."""
    return _store(
        settings.REDIS_URL,
        settings.REDIS_SOCKET_TIMEOUT,
        default_policy(),
        round(settings.BREAKER_DEDUPE_TTL_SECONDS * 1000),
    )


def _now_ms(now: datetime | None) -> int:
    return datetime_to_ms(now or timezone.now())


def _with_restore[T](tool: str, step: Callable[[], T]) -> T:
    """Run a store step; if Redis has no state for the tool, restore it and run it again."""
    try:
        return step()
    except Missing:
        _restore_tool(tool)
        return step()


def _restore_tool(name: str) -> None:
    tool, _ = Tool.objects.get_or_create(name=name)
    fleet_store().restore(name, _saved_fields(tool))


def _policy_of(tool: Tool) -> ToolPolicy | None:
    try:
        return tool.policy
    except ToolPolicy.DoesNotExist:
        return None


def _saved_fields(tool: Tool) -> dict[str, Any]:
    """A tool's Redis hash as the database knows it: state, policy, no counters, no lease."""
    policy = _policy_of(tool)
    return {
        "seq": tool.seq,
        "auto": tool.auto_state,
        "forced": tool.forced,
        "since": datetime_to_ms(tool.since),
        "ar": tool.auto_reason,
        "fr": tool.forced_reason,
        "cooldown": tool.cooldown_ms,
        "open_until": datetime_to_ms(tool.open_until),
        "window": tool.window,
        "consec": 0,
        "lh": "",
        "lt": "",
        "lu": 0,
        **(policy.redis_fields() if policy is not None else {}),
    }


# -- recording transitions -------------------------------------------------------------------


def _persist(
    tool_name: str,
    tracked: Sequence[TrackedTransition],
    *,
    probe: Probe | None = None,
    operator_action: OperatorAction | None = None,
    extra_cause: Mapping[str, Any] | None = None,
) -> list[FleetTransition]:
    """Write the transitions, mirror the newest state on the tool, open/close its incident, and
    make the Slack alerts of the transitions and operator action (sent once this commits)."""
    if not tracked and operator_action is None:
        return []
    rows = []
    with transaction.atomic():
        tool, _ = Tool.objects.get_or_create(name=tool_name)
        for item in tracked:
            rows.append(_persist_one(tool, item, probe, operator_action, extra_cause or {}))
        alerts_for_fleet_changes(tool=tool, transitions=rows, operator_action=operator_action)
    return rows


def _persist_one(
    tool: Tool,
    item: TrackedTransition,
    probe: Probe | None,
    operator_action: OperatorAction | None,
    extra_cause: Mapping[str, Any],
) -> FleetTransition:
    change, after = item.transition, item.after
    row = FleetTransition.objects.create(
        tool=tool,
        seq=change.seq,
        at=datetime_from_ms(change.at),
        from_state=change.from_state,
        to_state=change.to_state,
        auto_from=change.auto_from,
        auto_to=change.auto_to,
        forced=change.forced,
        cause_kind=change.kind,
        cause={**change.cause, **extra_cause},
        reason=change.reason,
        probe=probe,
        operator_action=operator_action,
    )
    # Two processes may persist one tool's transitions out of order: the newest seq wins.
    Tool.objects.filter(pk=tool.pk, seq__lt=after.seq).update(
        state=after.state,
        auto_state=after.auto,
        forced=after.forced,
        since=ms_to_datetime(after.since),
        auto_reason=after.auto_reason,
        forced_reason=after.forced_reason,
        cooldown_ms=after.cooldown_ms,
        open_until=ms_to_datetime(after.open_until),
        window=after.window,
        seq=after.seq,
    )
    _track_incident(tool, row)
    return row


def _track_incident(tool: Tool, row: FleetTransition) -> None:
    was_out, is_out = row.from_state in OUT_STATES, row.to_state in OUT_STATES
    if is_out and not was_out:
        if not Incident.objects.filter(tool=tool, closed_at__isnull=True).exists():
            Incident.objects.create(tool=tool, opened_at=row.at, opened_by=row, reason=row.reason)
    elif was_out and not is_out:
        Incident.objects.filter(tool=tool, closed_at__isnull=True).update(
            closed_at=row.at, closed_by=row
        )


# -- ingest ----------------------------------------------------------------------------------

# A blocked call never reached the vendor: the fleet has nothing to learn from it.
_FLEET_OUTCOMES = frozenset(
    {OutcomeChoice.SUCCESS.value, OutcomeChoice.RETRYABLE.value, OutcomeChoice.SEMANTIC.value}
)


def fleet_record_tool_calls(
    *, calls: Iterable[FleetCall], now: datetime | None = None
) -> list[FleetTransition]:
    """Apply accepted ``tool.call`` outcomes to their tools' fleet breakers, in order.

    Called by ingest inside its transaction. One script call per tool; resent event ids are
    recognised by Redis itself, so a batch whose database transaction failed after this ran is
    not counted twice when it comes back.
    """
    fleet_calls = [call for call in calls if call.outcome in _FLEET_OUTCOMES]
    stale_before = _stale_before(tool_names={call.tool for call in fleet_calls})
    by_tool: dict[str, list[OutcomeEvent]] = {}
    for call in fleet_calls:
        cutoff = stale_before.get(call.tool)
        if cutoff is not None and call.ts < cutoff:
            continue  # it happened before the breaker's last change: it must not undo it
        event = OutcomeEvent(
            call.event_id, call.worker_id, call.outcome, call.trial, call.dedupe_id
        )
        by_tool.setdefault(call.tool, []).append(event)
    if not by_tool:
        return []
    store, ms = fleet_store(), _now_ms(now)
    rows: list[FleetTransition] = []
    for tool, events in by_tool.items():
        result = _with_restore(tool, partial(store.apply, tool, events, now=ms))
        rows += _persist(tool, result.transitions)
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


@dataclass(frozen=True, slots=True)
class FleetView:
    """``GET /api/v1/fleet`` and the ``fleet`` object of every ingest reply."""

    version: int
    generation: str
    tools: dict[str, dict[str, Any]]

    @property
    def etag(self) -> str:
        # The generation changes whenever Redis is rebuilt, so a version that restarts from the
        # database's numbers can never be mistaken for an older snapshot's.
        return f'"{self.generation}.{self.version}"'

    def as_json(self) -> dict[str, Any]:
        return {"version": self.version, "tools": self.tools}


# What the fleet store raises when Redis is unreachable or failing.
FLEET_STORE_ERRORS: tuple[type[Exception], ...] = (redis.RedisError,)


def fleet_state_from_database() -> FleetView:
    """The fleet state as the database mirrors it: the answer when Redis cannot give one."""
    tools: dict[str, dict[str, Any]] = {}
    version = 0
    for tool in Tool.objects.only(
        "name", "state", "since", "auto_reason", "forced_reason", "forced", "seq"
    ):
        forced = bool(tool.forced)
        since = tool.since
        tools[tool.name] = {
            "state": tool.state,
            "since": since.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            if since
            else None,
            "reason": tool.forced_reason if forced else tool.auto_reason,
            "forced": forced,
        }
        version += tool.seq
    return FleetView(version, "db", tools)


def fleet_state() -> FleetView:
    """Every known tool's fleet state; ``version`` is the sum of the tools' change counters."""
    store = fleet_store()
    generation, states = store.snapshot()
    if generation is None:
        fleet_rebuild()
        generation, states = store.snapshot()
    tools: dict[str, dict[str, Any]] = {}
    version = 0
    for name, fields in states.items():
        forced = fields["forced"]
        state = forced or fields["auto"] or "closed"
        since = ms_to_datetime(int(fields["since"] or 0))
        entry: dict[str, Any] = {
            "state": state,
            "since": since.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            if since
            else None,
            "reason": fields["fr"] if forced else fields["ar"],
            "forced": bool(forced),
        }
        if state == "half_open":
            entry["trial"] = fields["p_trial"] or store.defaults.trial.value
        tools[name] = entry
        version += int(fields["seq"] or 0)
    return FleetView(version, generation or "", tools)


# -- rebuild, tick, probes, trial leases ------------------------------------------------------


def fleet_rebuild() -> int:
    """Write every tool's state from the database where Redis has none or an older one.

    Idempotent and safe while traffic flows: a tool whose Redis state is as new as the database's
    (same ``seq`` or newer) is left alone. Returns how many tools were written.
    """
    store = fleet_store()
    written = 0
    for tool in Tool.objects.select_related("policy").iterator(chunk_size=500):
        written += store.restore(tool.name, _saved_fields(tool))
    store.start_generation()
    return written


@dataclass(frozen=True, slots=True)
class ProbeOrder:
    tool: str
    window: int


def fleet_tick(*, now: datetime | None = None) -> list[ProbeOrder]:
    """Celery beat's tick: rebuild if Redis lost its data, move due tools to half-open, and
    list the probes to send (one per tool whose window has no live probe lease)."""
    store, ms = fleet_store(), _now_ms(now)
    generation, states = store.snapshot()
    if generation is None:
        fleet_rebuild()
        generation, states = store.snapshot()
    _reconcile(states, ms)  # first: a lost transition comes before the ones this tick makes
    orders = []
    for name, fields in states.items():
        trial = fields["p_trial"] or store.defaults.trial.value
        if fields["auto"] == "open" and int(fields["open_until"] or 0) <= ms:
            tracked, after, trial = _with_restore(name, partial(store.advance, name, now=ms))
            _persist(name, tracked)
            if after.auto == "half_open" and trial == TrialMode.PROBE:
                orders.append(ProbeOrder(name, after.window))
        elif (
            fields["auto"] == "half_open"
            and trial == TrialMode.PROBE
            and int(fields["lu"] or 0) <= ms
        ):
            orders.append(ProbeOrder(name, int(fields["window"] or 0)))
    _repair_incidents()
    return orders


# Longer than any ingest transaction can run (its statement timeout is 15 s): a transition that
# Redis made this long ago and the database still lacks was rolled back with its batch.
RECONCILE_AFTER_MS = 60_000


def _reconcile(states: Mapping[str, Mapping[str, str]], now_ms: int) -> None:
    """Record the state of tools whose Redis transition never reached the database.

    The ingest hook applies outcomes to Redis inside the batch's transaction; if that
    transaction then fails, Redis has moved (and recognises the resent events) but the database
    has no row. Without this, a rebuild after a Redis data loss would bring back the older state.
    """
    persisted = dict(Tool.objects.values_list("name", "seq"))
    for name, fields in states.items():
        seq, changed_at = int(fields["seq"] or 0), int(fields["changed_at"] or 0)
        if seq <= persisted.get(name, 0) or not changed_at:
            continue
        if now_ms - changed_at < RECONCILE_AFTER_MS:
            continue  # its ingest transaction may still be committing it
        tool, _ = Tool.objects.get_or_create(name=name)
        after = ToolState.from_hash(fields)
        change = Transition(
            seq=seq,
            at=changed_at,
            from_state=State(tool.state),
            to_state=after.state,
            auto_from=State(tool.auto_state),
            auto_to=after.auto,
            forced=after.forced,
            kind=CauseKind.RECONCILE,
            cause={"persisted_seq": tool.seq},
            reason=after.reason,
        )
        try:
            _persist(name, [TrackedTransition(change, after)])
        except IntegrityError:
            continue  # persisted meanwhile after all


def _repair_incidents() -> None:
    """Transitions of one tool persisted out of order can leave an incident open on a tool that
    is back (or none on a tool that is out); the mirrored state says which is right."""
    for incident in Incident.objects.filter(closed_at__isnull=True).exclude(
        tool__state__in=OUT_STATES
    ):
        last = incident.tool.transitions.order_by("-seq").first()
        if last is not None:
            Incident.objects.filter(pk=incident.pk).update(closed_at=last.at, closed_by=last)
    # NOT EXISTS, not ``.exclude(incidents__closed_at=None)``: that LEFT JOIN also drops the
    # tools with no incident at all, the very ones to repair.
    has_open = Incident.objects.filter(tool=OuterRef("pk"), closed_at__isnull=True)
    for tool in Tool.objects.filter(state__in=OUT_STATES).filter(~Exists(has_open)):
        opening = (
            tool.transitions.filter(to_state__in=OUT_STATES)
            .exclude(from_state__in=OUT_STATES)
            .order_by("-seq")
            .first()
        )
        if opening is not None:
            Incident.objects.create(
                tool=tool, opened_at=opening.at, opened_by=opening, reason=opening.reason
            )


def fleet_probe(
    *, tool_name: str, window: int, clock: Callable[[], datetime] = timezone.now
) -> Probe | None:
    """Make the one probe of ``window`` if this call wins its lease; record it and apply it.

    None when there is nothing to do: the tool has no probe (any more), the window is over, or
    another probe holds the lease (a duplicated tick or task).
    """
    tool = Tool.objects.select_related("policy").filter(name=tool_name).first()
    policy = _policy_of(tool) if tool is not None else None
    if tool is None or policy is None or not policy.probe_kind:
        return None
    store = fleet_store()
    ttl_ms = round((policy.probe_timeout_seconds + PROBE_LEASE_GRACE_SECONDS) * 1000)
    grant = _with_restore(
        tool_name,
        lambda: store.acquire(
            tool_name, holder=PROBE_HOLDER, ttl_ms=ttl_ms, now=_now_ms(clock()), window=window
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
            tool_name, token=grant.token, ok=result.ok, now=_now_ms(finished)
        )
        if tracked:
            Probe.objects.filter(pk=probe.pk).update(decided=True)
            probe.decided = True
        _persist(tool_name, tracked, probe=probe, extra_cause={"probe": probe.pk})
    return probe


def fleet_trial_acquire(
    *, tool_name: str, worker_id: str, now: datetime | None = None
) -> AcquireResult:
    """The half-open trial lease for an agent worker (tools without a probe); one at a time."""
    _existing_tool(tool_name)
    store = fleet_store()
    ttl_ms = round(settings.BREAKER_TRIAL_LEASE_SECONDS * 1000)
    return _with_restore(
        tool_name,
        lambda: store.acquire(
            tool_name, holder=AGENT_HOLDER_PREFIX + worker_id, ttl_ms=ttl_ms, now=_now_ms(now)
        ),
    )


# -- operators ------------------------------------------------------------------------------


def _existing_tool(name: str) -> Tool:
    tool = Tool.objects.select_related("policy").filter(name=name).first()
    if tool is None:
        raise UnknownToolError(f"no tool named {name!r} has reported to the fleet")
    return tool


def _clean_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise FleetInputError("a reason is required: say why, it is shown to everyone")
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
    now: datetime | None = None,
) -> OperatorAction:
    """Force open, force close, release or reset one tool fleet-wide, audited.

    Forced states override the automatic breaker until released; reset clears the automatic
    breaker's counters (and closes it) and leaves a forced state alone.
    """
    reason = _clean_reason(reason)
    tool = _existing_tool(tool_name)
    actor = _actor(user, token)
    store, ms = fleet_store(), _now_ms(now)
    applied = False
    try:
        with transaction.atomic():
            # The audit row first: if it cannot be written, Redis is never touched. Only a failed
            # commit after the Redis step can leave the action applied without its row.
            row = OperatorAction.objects.create(
                tool=tool,
                action=action,
                reason=reason,
                at=datetime_from_ms(ms),
                user=user,
                token=token,
                actor=actor,
                before={},
                after={},
            )
            result = _with_restore(
                tool.name, lambda: store.operate(tool.name, action=action, reason=reason, now=ms)
            )
            if result is None:
                raise NotForcedError(f"{tool.name!r} is not forced: there is nothing to release")
            applied = True
            row.before, row.after = result.before.as_json(), result.after.as_json()
            row.save(update_fields=["before", "after"])
            _persist(
                tool.name,
                result.transitions,
                operator_action=row,
                extra_cause={"actor": actor, "operator_action": row.pk},
            )
    except Exception:
        if applied:
            # Redis has the action, the database has no audit row for it: never silent. The
            # tick's reconcile records the state Redis holds within RECONCILE_AFTER_MS.
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
    tool = _existing_tool(tool_name)
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
    fields = (policy or ToolPolicy(tool=tool)).redis_fields()
    if not fleet_store().set_policy(tool.name, fields):
        _restore_tool(tool.name)


def fleet_tool_details(*, tool_name: str) -> dict[str, Any]:
    """One tool's live breaker for people: state, streak (count, workers, events), policy."""
    tool = _existing_tool(tool_name)
    fields, workers, streak = fleet_store().details(tool.name)
    policy = _policy_of(tool)
    effective = policy.fleet_policy() if policy is not None else default_policy()
    return {
        "tool": tool.name,
        "state": fields.get("forced") or fields.get("auto") or tool.state,
        "consecutive": int(fields.get("consec") or 0),
        "workers": workers,
        "streak_events": streak,
        "window": int(fields.get("window") or 0),
        "cooldown_ms": int(fields.get("cooldown") or 0) or effective.cooldown_ms,
        "open_until": ms_to_datetime(int(fields.get("open_until") or 0)),
        "lease_holder": fields.get("lh", ""),
        "policy": {
            "threshold": effective.threshold,
            "min_workers": effective.min_workers,
            "cooldown_ms": effective.cooldown_ms,
            "max_cooldown_ms": effective.max_cooldown_ms,
            "trial": effective.trial.value,
        },
    }
