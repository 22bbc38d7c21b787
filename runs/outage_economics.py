"""Outage economics from the runs: what each run met when a tool broke (refused fast, tool removed,
failed through, healthy), bounded aggregates of duration and spend per period, the headline that
compares them each with its own denominator, and the grouping of ``simulate_outage`` replays.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

from django.db.models import Avg, Case, CharField, Count, Exists, OuterRef, Q, QuerySet, Value, When

from runs.incident_runs import runs_affected
from runs.models import BreakerState, OutageReplay, Outcome, ReportedTransition, Run, ToolCall
from runs.simulation.scenario import MODES

# What a run met when it reached for the broken tool (the rules: this module's ``met_case``).
MET_HEALTHY = "healthy tool"


MET_FAILED_THROUGH = "failed through"


MET_REFUSED_FAST = "refused fast"


MET_TOOL_REMOVED = "tool removed"


MAX_REPLAYS_LISTED = 200


# simulate_outage plays its modes one after another: a replay that starts within this long of
# the previous one ending (and repeats no mode) belongs to the same invocation.
BATCH_GAP = timedelta(minutes=5)


MAX_REPLAYS_PER_BATCH = 10


TIMES = "\N{MULTIPLICATION SIGN}"


@dataclass(frozen=True)
class PeriodStats:
    """Finished runs of one period: how many, their mean duration (s) and mean spend ($)."""

    runs: int = 0
    mean_duration_s: float | None = None
    mean_spend_usd: float | None = None


@dataclass(frozen=True)
class Headline:
    """One line computed from the data: "runs got N times faster; model spend per run changed
    by M%" (with a multiplication sign), or why there is nothing to compare."""

    text: str
    against: str = ""  # what the runs were compared with; "" when they could not be
    speedup: float | None = None  # reference mean duration / this one: > 1 is faster
    spend_change_pct: float | None = None

    @property
    def compared(self) -> bool:
        return bool(self.against)


def compare(
    *, during: PeriodStats, reference: PeriodStats | None, against: str, missing: str
) -> Headline:
    """The outage window's runs against a reference period (mean per run, each measure with its
    own denominator). ``missing`` says why there is no reference, when there is none."""
    if during.runs == 0 or during.mean_duration_s is None:
        return Headline("No finished runs in the outage window to compare.")
    if reference is None or reference.runs == 0 or reference.mean_duration_s is None:
        return Headline(f"No reference to compare against: {missing}.")
    speed_text, speedup = _speed_text(reference.mean_duration_s, during.mean_duration_s)
    spend_text, change = _spend_text(reference.mean_spend_usd or 0.0, during.mean_spend_usd or 0.0)
    return Headline(f"{speed_text}; {spend_text}", against, speedup, change)


def _factor(ratio: float) -> str:
    # "12 times" reads better than "12.3 times"; below 10 the first decimal still matters.
    return f"{ratio:,.0f}" if ratio >= 9.95 else f"{ratio:.1f}"


def _speed_text(reference_s: float, during_s: float) -> tuple[str, float | None]:
    if during_s <= 0 or reference_s <= 0:
        if during_s <= 0 and reference_s <= 0:
            return f"run duration did not change (1.0{TIMES})", 1.0
        was, now = _seconds(reference_s), _seconds(during_s)
        return f"run duration went from {was} to {now}", None
    ratio = reference_s / during_s
    faster = ratio >= 1
    factor = _factor(ratio if faster else 1 / ratio)
    if factor == "1.0":
        return f"run duration did not change (1.0{TIMES})", ratio
    return f"runs got {factor}{TIMES} {'faster' if faster else 'slower'}", ratio


def _spend_text(reference_usd: float, during_usd: float) -> tuple[str, float | None]:
    if reference_usd <= 0:
        if during_usd <= 0:
            return "model spend per run changed by 0%", 0.0
        return f"model spend per run went from $0 to ${during_usd:,.4f}", None
    change = (during_usd - reference_usd) / reference_usd * 100
    return f"model spend per run changed by {_percent(change)}", change


def _percent(change: float) -> str:
    size = abs(change)
    digits = f"{size:,.0f}" if size >= 9.95 else f"{size:.1f}".removesuffix(".0")
    if digits == "0":
        return "0%"
    return f"{'+' if change > 0 else '-'}{digits}%"


def _seconds(value: float) -> str:
    return f"{value:,.1f} s"


def met_case(tool: str) -> Case:
    """What the run met with ``tool``, in SQL (one EXISTS per rule, on indexed columns)."""
    calls = ToolCall.objects.filter(run=OuterRef("pk"), tool=tool)
    removed = ReportedTransition.objects.filter(
        run=OuterRef("pk"), tool=tool, state=BreakerState.OPEN
    )
    return Case(
        When(Exists(calls.filter(outcome=Outcome.BLOCKED)), then=Value(MET_REFUSED_FAST)),
        When(Exists(removed), then=Value(MET_TOOL_REMOVED)),
        When(Exists(calls.filter(outcome=Outcome.RETRYABLE)), then=Value(MET_FAILED_THROUGH)),
        default=Value(MET_HEALTHY),
        output_field=CharField(),
    )


def classified_runs(runs: QuerySet[Run], *, tool: str) -> QuerySet[Any]:
    """``runs`` with ``met`` annotated: what each one met with ``tool``."""
    return runs.annotate(met=met_case(tool))


class Period(NamedTuple):
    key: str
    condition: Q
    seconds_per_ms: float  # 1/1000, times a replay's speed for simulated seconds


def period_stats(
    runs: QuerySet[Run],
    periods: Sequence[Period],
    *,
    clocks: Mapping[OutageReplay, ReplayClock] | None = None,
) -> tuple[dict[str, PeriodStats], dict[str, int]]:
    """One aggregate query: per period, the finished runs' count, mean duration and mean spend,
    and how many runs have not finished (no duration yet, so they are not drawn).

    The durations of the runs of the replays in ``clocks`` are measured on that replay's clock
    (``ReplayClock``): for each replay whose clock paused, one more query reads its runs that
    overlap the pauses and takes each one's share of them out of its period's mean."""
    finished = Q(duration_ms__isnull=False)
    aggregates: dict[str, Any] = {}
    for i, period in enumerate(periods):
        aggregates[f"n{i}"] = Count("pk", filter=finished & period.condition)
        aggregates[f"d{i}"] = Avg("duration_ms", filter=finished & period.condition)
        aggregates[f"s{i}"] = Avg("model_spend_usd", filter=finished & period.condition)
        aggregates[f"u{i}"] = Count("pk", filter=~finished & period.condition)
    row = runs.aggregate(**aggregates) if aggregates else {}
    paused_ms = _paused_ms(runs, periods, clocks or {}) if periods else {}
    stats: dict[str, PeriodStats] = {}
    unfinished: dict[str, int] = {}
    for i, period in enumerate(periods):
        count, duration, spend = row[f"n{i}"], row[f"d{i}"], row[f"s{i}"]
        if duration is not None and count:
            duration = max(0.0, float(duration) - paused_ms.get(period.key, 0.0) / count)
        stats[period.key] = PeriodStats(
            runs=count,
            mean_duration_s=None if duration is None else float(duration) * period.seconds_per_ms,
            mean_spend_usd=None if spend is None else float(spend),
        )
        unfinished[period.key] = row[f"u{i}"]
    return stats, unfinished


def _paused_ms(
    runs: QuerySet[Run], periods: Sequence[Period], clocks: Mapping[OutageReplay, ReplayClock]
) -> dict[str, float]:
    """Per period key, the real milliseconds of the replays' pauses inside their finished runs."""
    which = Case(
        *[When(period.condition, then=Value(period.key)) for period in periods],
        default=Value(""),
        output_field=CharField(),
    )
    paused: dict[str, float] = {}
    for replay, clock in clocks.items():
        if not clock.paused:
            continue
        overlapping = runs.filter(
            worker__worker_id__startswith=replay.worker_prefix,
            duration_ms__isnull=False,
            started_at__lt=datetime.fromtimestamp(clock.ends[-1], UTC),
            finished_at__gt=datetime.fromtimestamp(clock.starts[0], UTC),
        )
        rows = overlapping.annotate(period=which).values_list("period", "started_at", "duration_ms")
        for key, started, ms in rows:
            if key and ms is not None:
                paused[key] = paused.get(key, 0.0) + clock.paused_s(started, ms) * 1000
    return paused


def usd(value: Decimal | float | None) -> float:
    return 0.0 if value is None else float(value)


def runs_reaching_for(*, tool_name: str, start: datetime, end: datetime) -> QuerySet[Run]:
    """Runs that called the tool, or had it removed, in [start, end): the incident page's
    "runs affected" (runs.incident_runs), over a longer window."""
    return runs_affected(tool=tool_name, start=start, end=end)


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

    @property
    def speeds(self) -> list[float]:
        return sorted({replay_speed(replay) for replay in self.replays})


def _same_invocation(batch: list[OutageReplay], replay: OutageReplay, gap: timedelta) -> bool:
    last = batch[-1]
    label, last_label = replay.scenario.get("batch"), last.scenario.get("batch")
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


def minutes_since(replay: OutageReplay, moment: datetime) -> float:
    return (moment - replay.started_at).total_seconds() * replay_speed(replay) / 60


def replay_periods(replay: OutageReplay) -> list[Period]:
    mine = Q(worker__worker_id__startswith=replay.worker_prefix)
    scale = replay_speed(replay) / 1000
    start, end = replay.outage_started_at, replay.outage_ended_at
    return [
        Period(f"{replay.pk}:baseline", mine & Q(started_at__lt=start), scale),
        Period(f"{replay.pk}:outage", mine & Q(started_at__gte=start, started_at__lt=end), scale),
        Period(f"{replay.pk}:after", mine & Q(started_at__gte=end), scale),
    ]
