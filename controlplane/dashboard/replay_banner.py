"""Is an outage replay playing? The board says so, and which mode, so nobody mistakes it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from breakers.replay.outage import PLAYING_AT_MOST, ReplayResult
from runs.models import OutageReplay

__all__ = ("PlayingReplay", "playing_replay")


@dataclass(frozen=True)
class PlayingReplay:
    mode: str
    started_at: datetime
    speed: float
    position: int  # 1-based, among the modes of its invocation started so far
    outage_started_at: datetime
    outage_ended_at: datetime


def playing_replay(*, now: datetime | None = None) -> PlayingReplay | None:
    """The newest unfinished replay, if one started within the last hour (two small queries)."""
    now = now or timezone.now()
    replay = (
        OutageReplay.objects.filter(finished_at__isnull=True, started_at__gte=now - PLAYING_AT_MOST)
        .order_by("-started_at", "-pk")
        .first()
    )
    if replay is None:
        return None
    batch = ReplayResult.of(replay).batch
    same_batch = OutageReplay.objects.filter(scenario__batch=batch)
    position = same_batch.filter(started_at__lte=replay.started_at).count() if batch else 1
    return PlayingReplay(
        mode=replay.mode,
        started_at=replay.started_at,
        speed=replay.speed,
        position=position,
        outage_started_at=replay.outage_started_at,
        outage_ended_at=replay.outage_ended_at,
    )
