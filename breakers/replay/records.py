"""The outage replays as the pages read them back: a batch per ``simulate_outage`` invocation,
each replay's clock (its pauses taken out of its runs), its periods and its modes' order."""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from breakers.replay.result import batch_label
from breakers.replay.scenario import MODES
from runs.models import OutageReplay
from runs.outage_economics import Period

MAX_REPLAYS_LISTED = 200


# simulate_outage plays its modes one after another: a replay that starts within this long of
# the previous one ending (and repeats no mode) belongs to the same invocation.
BATCH_GAP = timedelta(minutes=5)


MAX_REPLAYS_PER_BATCH = 10

# A replay whose process was killed never writes finished_at: after this long it no longer counts
# as playing but as interrupted (the default replay plays all five modes in a few minutes).
PLAYING_AT_MOST = timedelta(hours=1)


def replay_interrupted(replay: OutageReplay, *, now: datetime | None = None) -> bool:
    """Stopped before its mode was played through: marked so by the command (Ctrl-C, SIGTERM,
    an error), or still unfinished ``PLAYING_AT_MOST`` after it began (its process was killed)."""
    summary = replay.summary if isinstance(replay.summary, dict) else {}
    if summary.get("interrupted"):
        return True
    now = now or timezone.now()
    return replay.finished_at is None and replay.started_at < now - PLAYING_AT_MOST


def _planned_modes(replay: OutageReplay) -> list[str] | None:
    record = replay.scenario if isinstance(replay.scenario, dict) else {}
    planned = record.get("modes_planned")
    if not isinstance(planned, list):
        return None  # a replay older than the record
    return [str(mode) for mode in planned]


def mode_label(mode: str) -> str:
    """A mode as figures show it: plotly renders some HTML in labels, so anything but the
    command's own mode names is reduced to plain word characters."""
    return mode if mode in MODES else re.sub(r"[^\w-]", "?", mode)[:30]


def mode_order(mode: str) -> tuple[int, str]:
    return (MODES.index(mode) if mode in MODES else len(MODES), mode)


def replay_speed(replay: OutageReplay) -> float:
    """Real seconds times speed = the story's seconds (a corrupt speed counts as 1)."""
    return _story_speed(replay.speed)


def _story_speed(speed: float | None) -> float:
    return speed if speed and math.isfinite(speed) and speed > 0 else 1.0


@dataclass(frozen=True)
class ReplayClock:
    """A replay's own clock, to measure its runs by: real seconds x speed, less the time it
    stood still (``OutageReplay.pauses``) while the control plane caught up. The runs'
    timestamps are wall times and include the pauses; the command's table does not."""

    speed: float
    starts: tuple[float, ...] = ()  # each pause's start and end, Unix seconds, in order
    ends: tuple[float, ...] = ()
    before: tuple[float, ...] = ()  # seconds paused before each pause began

    @classmethod
    def of(cls, replay: OutageReplay) -> ReplayClock:
        return cls.from_record(speed=replay.speed, pauses=replay.pauses)

    @classmethod
    def from_record(cls, *, speed: float | None, pauses: object) -> ReplayClock:
        """The clock of a replay's ``speed`` and ``pauses`` as stored: a corrupt speed counts as
        1, entries of ``pauses`` that are not (start, end) pairs of finite numbers are ignored,
        and overlapping ones merged."""
        spans: list[list[float]] = []
        for item in sorted(_spans(pauses)):
            if spans and item[0] <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], item[1])
            else:
                spans.append(list(item))
        before, total = [], 0.0
        for start, end in spans:
            before.append(total)
            total += end - start
        return cls(
            speed=_story_speed(speed),
            starts=tuple(start for start, _ in spans),
            ends=tuple(end for _, end in spans),
            before=tuple(before),
        )

    @property
    def paused(self) -> bool:
        return bool(self.starts)

    def _paused_until(self, at: float) -> float:
        i = bisect_right(self.starts, at) - 1
        return 0.0 if i < 0 else self.before[i] + min(at, self.ends[i]) - self.starts[i]

    def paused_s(self, started_at: datetime, duration_ms: int | float) -> float:
        """Real seconds this clock stood still during a run."""
        start = started_at.timestamp()
        return self._paused_until(start + duration_ms / 1000) - self._paused_until(start)

    def story_seconds(self, origin: datetime, moment: datetime) -> float:
        """Simulated seconds from ``origin`` to ``moment``: the real seconds between them less
        the pauses among them, times the speed (negative when ``moment`` comes first)."""
        start, end = origin.timestamp(), moment.timestamp()
        paused = self._paused_until(end) - self._paused_until(start)
        return (end - start - paused) * self.speed

    def run_seconds(self, started_at: datetime, duration_ms: int | float) -> float:
        """A run's duration in the story's seconds, as the command's table measures it."""
        real_s = duration_ms / 1000 - self.paused_s(started_at, duration_ms)
        return max(0.0, real_s) * self.speed


def _spans(pauses: object) -> Iterator[tuple[float, float]]:
    for item in pauses if isinstance(pauses, list) else []:
        if not isinstance(item, list | tuple) or len(item) != 2:
            continue
        try:
            start, end = (float(value) for value in item)
        except (TypeError, ValueError):
            continue
        if math.isfinite(start) and math.isfinite(end) and start < end:
            yield start, end


@dataclass(frozen=True)
class ReplayBatch:
    """The replays one ``simulate_outage`` invocation made: at most one per mode."""

    replays: tuple[OutageReplay, ...]  # in mode order: none, fail-fast, run, worker, fleet

    @property
    def key(self) -> int:
        """The id of its first replay: what the page's ``?batch=`` names."""
        return self.first.pk

    @property
    def first(self) -> OutageReplay:
        return min(self.replays, key=lambda replay: (replay.started_at, replay.pk))

    @property
    def started_at(self) -> datetime:
        return self.first.started_at

    @property
    def finished(self) -> bool:
        return all(replay.finished_at is not None for replay in self.replays)

    @property
    def modes(self) -> list[str]:
        return [replay.mode for replay in self.replays]

    def interrupted(self, *, now: datetime | None = None) -> bool:
        """A replay of it was stopped half-played, or the command stopped before playing every
        mode it was asked for."""
        if any(replay_interrupted(replay, now=now) for replay in self.replays):
            return True
        planned = _planned_modes(self.first)
        return self.finished and planned is not None and set(planned) - set(self.modes) != set()

    def status(self, *, now: datetime | None = None) -> str:
        """ "complete", "playing" or "interrupted": only a complete batch is shown by default."""
        if self.interrupted(now=now):
            return "interrupted"
        return "complete" if self.finished else "playing"

    @property
    def speeds(self) -> list[float]:
        return sorted({replay_speed(replay) for replay in self.replays})


def _same_invocation(batch: list[OutageReplay], replay: OutageReplay, gap: timedelta) -> bool:
    last = batch[-1]
    label, last_label = batch_label(replay), batch_label(last)
    if label is not None and last_label is not None:
        return bool(label == last_label)
    ended = last.finished_at or last.started_at
    return (
        replay.mode not in {r.mode for r in batch}
        and len(batch) < MAX_REPLAYS_PER_BATCH
        and replay.started_at - ended <= gap
    )


def group_replays(
    replays: Iterable[OutageReplay], *, gap: timedelta = BATCH_GAP
) -> list[ReplayBatch]:
    """Replays grouped by the invocation that made them, newest batch first.

    The command plays its modes one after another, so a replay joins the one before it when it
    started within ``gap`` of that one's end and its mode is not in the batch yet. (A ``batch``
    key in both replays' ``scenario``, when the command writes one, decides instead.)
    """
    ordered = sorted(replays, key=lambda replay: (replay.started_at, replay.pk))
    groups: list[list[OutageReplay]] = []
    for replay in ordered:
        if groups and _same_invocation(groups[-1], replay, gap):
            groups[-1].append(replay)
        else:
            groups.append([replay])
    batches = [
        ReplayBatch(tuple(sorted(group, key=lambda replay: mode_order(replay.mode))))
        for group in groups
    ]
    return batches[::-1]


def recent_replay_batches(*, limit: int = MAX_REPLAYS_LISTED) -> list[ReplayBatch]:
    """The batches among the newest ``limit`` replays (one query)."""
    return group_replays(OutageReplay.objects.order_by("-started_at", "-pk")[:limit])


def minutes_since(
    replay: OutageReplay, moment: datetime, *, clock: ReplayClock | None = None
) -> float:
    """Simulated minutes from the replay's start to ``moment`` on its own clock: the pauses,
    while it waited for the control plane or for due runs, are not the story's time
    (``clock``: the replay's ``ReplayClock``, when the caller has built it already)."""
    clock = clock or ReplayClock.of(replay)
    return clock.story_seconds(replay.started_at, moment) / 60


def replay_periods(replay: OutageReplay) -> list[Period]:
    mine = Q(worker__worker_id__startswith=replay.worker_prefix)
    scale = replay_speed(replay) / 1000
    start, end = replay.outage_started_at, replay.outage_ended_at
    return [
        Period(f"{replay.pk}:baseline", mine & Q(started_at__lt=start), scale),
        Period(f"{replay.pk}:outage", mine & Q(started_at__gte=start, started_at__lt=end), scale),
        Period(f"{replay.pk}:after", mine & Q(started_at__gte=end), scale),
    ]
