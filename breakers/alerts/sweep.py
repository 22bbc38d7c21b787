"""Beat's sweep: unstick dead claims, re-enqueue lost deliveries, settle finished spells."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from breakers.alerts.creation import enqueue_on_commit
from breakers.alerts.facts import is_closing, is_opening
from breakers.fleet.rules import CauseKind
from breakers.models import Alert, AlertKind, AlertState, FleetTransition, Tool

# A delivery holds its claim for at most one HTTP call (SLACK_TIMEOUT_SECONDS) plus a few
# queries; a claim this much older than that belongs to a worker that died mid-send.
STUCK_GRACE_SECONDS = 60.0


# An enqueued alert is normally claimed within milliseconds; one still pending this long after
# it was due lost its task (broker down at commit, worker lost with a countdown retry).
OVERDUE_SECONDS = 30.0


SWEEP_BATCH = 500


@dataclass(slots=True)
class SweepResult:
    unstuck: int = 0
    requeued: list[int] = field(default_factory=list)
    settled: int = 0


def sweep_alerts(*, now: datetime | None = None) -> SweepResult:
    """Beat's sweep: unstick dead claims, re-enqueue lost deliveries, settle finished spells."""
    now = now or timezone.now()
    result = SweepResult()
    stuck_before = now - timedelta(
        seconds=float(settings.SLACK_TIMEOUT_SECONDS) + STUCK_GRACE_SECONDS
    )
    stuck = list(
        Alert.objects.filter(state=AlertState.SENDING, claimed_at__lt=stuck_before)
        .order_by("pk")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    # Still conditional on the old claim: a claim that finished meanwhile is left alone.
    result.unstuck = Alert.objects.filter(
        pk__in=stuck, state=AlertState.SENDING, claimed_at__lt=stuck_before
    ).update(state=AlertState.PENDING, next_attempt_at=now)
    overdue = now - timedelta(seconds=OVERDUE_SECONDS)
    lost = (
        Alert.objects.filter(state=AlertState.PENDING)
        .filter(
            Q(next_attempt_at__lte=overdue)
            | Q(next_attempt_at__isnull=True, created_at__lte=overdue)
            | Q(pk__in=stuck)
        )
        .order_by("pk")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    result.requeued = list(lost)
    enqueue_on_commit(result.requeued)
    result.settled = settle_spells(now=now)
    return result


def settle_spells(*, now: datetime) -> int:
    """End the flapping spells that are over: send the tool's last word if it was grouped."""
    spells = (
        Alert.objects.filter(kind=AlertKind.FLAPPING, group_until__lte=now, payload__settled=False)
        .values_list("transition_id", "tool_id")
        .order_by("transition_id")
        .distinct()[:SWEEP_BATCH]
    )
    settled = 0
    for transition_id, tool_id in list(spells):
        with transaction.atomic():
            Tool.objects.select_for_update().filter(pk=tool_id).first()
            rows = list(
                Alert.objects.select_for_update().filter(
                    transition_id=transition_id, kind=AlertKind.FLAPPING
                )
            )
            if not rows or rows[0].payload.get("settled"):
                continue  # another sweep did it
            _send_last_word(tool_id, spell_transition_id=transition_id)
            for alert in rows:
                payload = {**alert.payload, "settled": True}
                Alert.objects.filter(pk=alert.pk).update(payload=payload)
            settled += 1
    return settled


def _send_last_word(tool_id: int, *, spell_transition_id: int) -> None:
    spell_seq = FleetTransition.objects.filter(pk=spell_transition_id).values("seq")
    newer_spell = Alert.objects.filter(
        tool_id=tool_id, kind=AlertKind.FLAPPING, transition__seq__gt=spell_seq[:1]
    ).exists()
    if newer_spell:
        return  # the tool flapped on into a new spell, which will have the last word
    latest = _latest_state_change(tool_id)
    if latest is None or latest.cause_kind == CauseKind.OPERATOR:
        return  # an operator had the last word, and it was announced
    ids = list(
        Alert.objects.filter(transition=latest, state=AlertState.GROUPED).values_list(
            "pk", flat=True
        )
    )
    Alert.objects.filter(pk__in=ids).update(state=AlertState.PENDING, next_attempt_at=None)
    enqueue_on_commit(ids)


def _latest_state_change(tool_id: int) -> FleetTransition | None:
    """The tool's newest transition that moved it into or out of the toolsets."""
    for row in FleetTransition.objects.filter(tool_id=tool_id).order_by("-seq")[:200]:
        if is_opening(row) or is_closing(row):
            return row
    return None
