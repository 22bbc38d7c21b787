"""``replay_ways`` invocations as rows (``runs.models.WaysReplay``): written as each play
finishes, marked when the command stops half-played, read back newest first
(docs/adr/0216-ways-replays-are-rows-written-per-play.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from breakers.replay.caching import PROVIDERS
from breakers.replay.scenario import MODES, Scenario
from breakers.replay.ways_matrix import REPLAY_WAYS, assumptions, cheapest_ways, play_ways, plays
from runs.models import WaysReplay

__all__ = (
    "WAYS_PLAYING_AT_MOST",
    "latest_ways_replays",
    "play_and_record_ways",
    "ways_status",
)

# The full matrix takes about 35 minutes at speed 60: a record unfinished this long after it
# began had its process killed (no signal handler ran) and counts as interrupted.
WAYS_PLAYING_AT_MOST = timedelta(hours=3)
WAYS_LISTED = 20


def play_and_record_ways(
    *,
    scenario: Scenario,
    url: str,
    speed: float,
    providers: Sequence[str] = tuple(PROVIDERS),
    modes: Sequence[str] = MODES,
    ways: Sequence[str] = REPLAY_WAYS,
    on_play: Callable[[str, str, str | None], None] | None = None,
) -> tuple[WaysReplay, list[dict[str, Any]]]:
    """``play_ways`` with its record: the row is written before the first play, grows by one
    play as each finishes, and is marked interrupted if anything (Ctrl-C, SIGTERM, an error)
    stops the command before the last one."""
    record = WaysReplay.objects.create(
        speed=speed,
        scenario=json.loads(json.dumps(asdict(scenario), default=str)),
        assumptions=assumptions(scenario),
        planned=[list(play) for play in plays(providers, modes, ways)],
    )
    try:
        rows = play_ways(
            scenario=scenario,
            url=url,
            speed=speed,
            providers=providers,
            modes=modes,
            ways=ways,
            on_play=on_play,
            on_row=lambda row: _add_row(record, row),
        )
    except BaseException as error:  # Ctrl-C and SIGTERM too: the record must not stay "playing"
        record.finished_at = timezone.now()
        record.interrupted_by = type(error).__name__[:100]
        record.save(update_fields=["finished_at", "interrupted_by"])
        raise
    record.finished_at = timezone.now()
    record.complete = True
    record.save(update_fields=["finished_at", "complete"])
    return record, rows


def _add_row(record: WaysReplay, row: Mapping[str, Any]) -> None:
    # JSON has no NaN or infinity (PostgreSQL refuses them): a figure that is not one is None.
    finite = {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()
    }
    record.rows = [*record.rows, json.loads(json.dumps(finite, default=str))]
    record.verdicts = cheapest_ways(record.rows)
    record.save(update_fields=["rows", "verdicts"])


def ways_status(record: WaysReplay, *, now: datetime | None = None) -> str:
    """ "complete", "playing" or "interrupted": only a complete record is shown by default."""
    if record.complete:
        return "complete"
    now = now or timezone.now()
    if record.interrupted_by or record.finished_at is not None:
        return "interrupted"
    return "interrupted" if record.started_at < now - WAYS_PLAYING_AT_MOST else "playing"


def latest_ways_replays(*, limit: int = WAYS_LISTED) -> list[WaysReplay]:
    """The newest records, newest first (one query)."""
    return list(WaysReplay.objects.order_by("-started_at", "-pk")[:limit])
