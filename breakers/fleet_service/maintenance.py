"""Beat's fleet maintenance: rebuild Redis from the database, tick, reconcile lost transitions."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.db import IntegrityError
from django.db.models import Exists, OuterRef

from breaker_panel.core import State
from breakers.fleet.rules import OUT_STATES, CauseKind, Transition, TrialMode
from breakers.fleet.store import FleetStore, ToolState, TrackedTransition
from breakers.fleet_service.transitions import (
    epoch_ms,
    fleet_store,
    persist_transitions,
    saved_policy,
    saved_state,
    with_restore,
)
from breakers.models import Incident, Tool

logger = logging.getLogger(__name__)


def fleet_rebuild() -> int:
    """Write every tool's state from the database where Redis has none or an older one.

    Idempotent and safe while traffic flows: a tool whose Redis state is as new as the database's
    (same ``seq`` or newer) is left alone. Returns how many tools were written.
    """
    store = fleet_store()
    written = 0
    for tool in Tool.objects.select_related("policy").iterator(chunk_size=500):
        written += store.restore(tool.name, saved_state(tool), saved_policy(tool))
    store.start_generation()
    return written


@dataclass(frozen=True, slots=True)
class ProbeOrder:
    tool: str
    window: int


def fleet_tick(*, now: datetime | None = None) -> list[ProbeOrder]:
    """Celery beat's tick: rebuild if Redis lost its data, move due tools to half-open, and
    list the probes to send (one per tool whose window has no live probe lease)."""
    store, ms = fleet_store(), epoch_ms(now)
    generation, states = store.snapshot()
    if generation is None:
        fleet_rebuild()
        generation, states = store.snapshot()
    _reconcile(states, ms)  # first: a lost transition comes before the ones this tick makes
    orders = []
    for name, tool in states.items():
        # One tool at a time: a damaged hash, a database error or a bug met by one tool is
        # logged and that tool skipped; it must never stop the others from recovering.
        try:
            order = _tick_tool(store, name, tool, ms)
        except Exception:
            logger.exception("fleet tick: skipped tool %r after an error", name)
            continue
        if order is not None:
            orders.append(order)
    try:
        _repair_incidents()
    except Exception:
        logger.exception("fleet tick: repairing incidents failed")
    return orders


def _tick_tool(store: FleetStore, name: str, tool: ToolState, ms: int) -> ProbeOrder | None:
    trial = tool.trial or store.defaults.trial.value
    if tool.auto is State.OPEN and tool.open_until <= ms:
        tracked, after, trial = with_restore(name, partial(store.advance, name, now=ms))
        persist_transitions(name, tracked)
        if after.auto == "half_open" and trial == TrialMode.PROBE:
            return ProbeOrder(name, after.window)
    elif tool.auto is State.HALF_OPEN and trial == TrialMode.PROBE and tool.lease_until <= ms:
        return ProbeOrder(name, tool.window)
    return None


# Longer than any ingest transaction can run (its statement timeout is 15 s): a transition that
# Redis made this long ago and the database still lacks was rolled back with its batch.
RECONCILE_AFTER_MS = 60_000


def _reconcile(states: Mapping[str, ToolState], now_ms: int) -> None:
    """Record the state of tools whose Redis transition never reached the database.

    The ingest hook applies outcomes to Redis inside the batch's transaction; if that
    transaction then fails, Redis has moved (and recognises the resent events) but the database
    has no row. Without this, a rebuild after a Redis data loss would bring back the older state.
    """
    persisted = dict(Tool.objects.values_list("name", "seq"))
    for name, after in states.items():
        seq, changed_at = after.seq, after.changed_at
        if seq <= persisted.get(name, 0) or not changed_at:
            continue
        if now_ms - changed_at < RECONCILE_AFTER_MS:
            continue  # its ingest transaction may still be committing it
        try:
            _reconcile_tool(name, after)
        except Exception:
            logger.exception("fleet tick: could not reconcile tool %r", name)


def _reconcile_tool(name: str, after: ToolState) -> None:
    tool, _ = Tool.objects.get_or_create(name=name)
    change = Transition(
        seq=after.seq,
        at=after.changed_at,
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
        persist_transitions(name, [TrackedTransition(change, after)])
    except IntegrityError:
        return  # persisted meanwhile after all


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
