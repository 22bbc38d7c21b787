"""Outage economics: what each run met when a tool broke, what it took and what it cost.

The product's claim is that removing a broken tool saves money while failing fast only saves
time. These functions read the runs around an incident (or a ``simulate_outage`` replay) and
put the two measures side by side, each with its own denominator, against a reference:

- an incident is compared with the same length of time just before it (its baseline);
- a replay mode is compared with mode ``none`` (no breaker) of the same batch of replays, and
  mode ``none`` itself with its own runs from before the outage.

What a run *met* when it reached for the broken tool (one label per run, first match wins):

1. ``refused fast``: a call was refused by a breaker (outcome ``blocked``): the model was still
   offered the tool and kept asking for it. Checked first because a fail-fast breaker also
   reports the run's removal (the SDK took the tool away) while the agent kept offering it.
2. ``tool removed``: a breaker reported the tool open for this run (any scope).
3. ``failed through``: a call failed after its retries (outcome ``retryable``).
4. ``healthy tool``: none of these.

Every query is bounded whatever the table sizes: figures come from aggregates in SQL (exact),
and the points drawn are at most ``MAX_CHART_RUNS`` runs per chart, every n-th run by start time
(deterministic, so a reload draws the same points), and the chart says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

from django.db.models import (
    Avg,
    Case,
    CharField,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
    Window,
)
from django.db.models.functions import RowNumber
from django.utils import timezone

from breakers.models import Incident
from controlplane.dashboard import charts
from controlplane.dashboard.charts import (
    MET_FAILED_THROUGH,
    MET_HEALTHY,
    MET_REFUSED_FAST,
    MET_TOOL_REMOVED,
    ModeBar,
    RunPoint,
    Span,
)
from runs.models import (
    BreakerState,
    OutageReplay,
    Outcome,
    ReportedTransition,
    Run,
    ToolCall,
    Worker,
)
from runs.queries import runs_affected
from runs.simulation.scenario import MODES, Scenario
from runs.simulation.script import SEARCH

MAX_CHART_RUNS = 5_000
MAX_REPLAYS_LISTED = 200
# simulate_outage plays its modes one after another: a replay that starts within this long of
# the previous one ending (and repeats no mode) belongs to the same invocation.
BATCH_GAP = timedelta(minutes=5)
MAX_REPLAYS_PER_BATCH = 10
TIMES = "\N{MULTIPLICATION SIGN}"


# -- the headline -------------------------------------------------------------------------------


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


# -- bounded queries ------------------------------------------------------------------------------


def _met(tool: str) -> Case:
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
    return runs.annotate(met=_met(tool))


class _Period(NamedTuple):
    key: str
    condition: Q
    seconds_per_ms: float  # 1/1000, times a replay's speed for simulated seconds


def _period_stats(
    runs: QuerySet[Run], periods: Sequence[_Period]
) -> tuple[dict[str, PeriodStats], dict[str, int]]:
    """One aggregate query: per period, the finished runs' count, mean duration and mean spend,
    and how many runs have not finished (no duration yet, so they are not drawn)."""
    finished = Q(duration_ms__isnull=False)
    aggregates: dict[str, Any] = {}
    for i, period in enumerate(periods):
        aggregates[f"n{i}"] = Count("pk", filter=finished & period.condition)
        aggregates[f"d{i}"] = Avg("duration_ms", filter=finished & period.condition)
        aggregates[f"s{i}"] = Avg("model_spend_usd", filter=finished & period.condition)
        aggregates[f"u{i}"] = Count("pk", filter=~finished & period.condition)
    row = runs.aggregate(**aggregates) if aggregates else {}
    stats: dict[str, PeriodStats] = {}
    unfinished: dict[str, int] = {}
    for i, period in enumerate(periods):
        duration, spend = row[f"d{i}"], row[f"s{i}"]
        stats[period.key] = PeriodStats(
            runs=row[f"n{i}"],
            mean_duration_s=None if duration is None else float(duration) * period.seconds_per_ms,
            mean_spend_usd=None if spend is None else float(spend),
        )
        unfinished[period.key] = row[f"u{i}"]
    return stats, unfinished


@dataclass(frozen=True)
class Sample:
    """The runs drawn on a chart: every ``stride``-th finished run by start time."""

    rows: list[tuple[Any, ...]]
    total: int  # finished runs they were drawn from
    stride: int

    def note(self, *, unfinished: int = 0) -> str | None:
        return sampling_note(
            shown=len(self.rows), total=self.total, stride=self.stride, unfinished=unfinished
        )


def sampling_note(*, shown: int, total: int, stride: int, unfinished: int = 0) -> str | None:
    """What a chart leaves out, in words under it; None when it shows every run."""
    parts = []
    if stride > 1:
        parts.append(
            f"Showing {shown:,} of {total:,} finished runs: "
            f"every {_ordinal(stride)} run by start time."
        )
    if unfinished:
        parts.append(f"{unfinished:,} unfinished run{'s' if unfinished != 1 else ''} not shown.")
    return " ".join(parts) or None


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


def sample_runs(
    runs: QuerySet[Run],
    *,
    tool: str,
    total: int,
    fields: Sequence[str] = (),
    cap: int = MAX_CHART_RUNS,
    **annotations: Any,
) -> Sample:
    """At most ``cap`` finished runs, evenly spread over time, with what each met: rows of
    (started_at, duration_ms, model_spend_usd, met, *fields). ``total`` (the number of finished
    runs, from the aggregate query) sets the stride; the LIMIT holds even if more arrived since."""
    stride = max(1, math.ceil(total / cap))
    rows = classified_runs(runs.filter(duration_ms__isnull=False), tool=tool)
    if annotations:
        rows = rows.annotate(**annotations)
    if stride > 1:
        # Filtering on a window function: Django runs it in a subquery (QUALIFY emulation).
        order = [F("started_at").asc(), F("pk").asc()]
        rows = rows.annotate(position=Window(RowNumber(), order_by=order)).annotate(
            slot=ExpressionWrapper((F("position") - 1) % stride, output_field=IntegerField())
        )
        rows = rows.filter(slot=0)
    values = rows.order_by("started_at", "pk").values_list(
        "started_at", "duration_ms", "model_spend_usd", "met", *fields
    )
    return Sample(rows=list(values[:cap]), total=total, stride=stride)


def _usd(value: Decimal | float | None) -> float:
    return 0.0 if value is None else float(value)


# -- incidents ------------------------------------------------------------------------------------


def runs_reaching_for(*, tool_name: str, start: datetime, end: datetime) -> QuerySet[Run]:
    """Runs that called the tool, or had it removed, in [start, end): the incident page's
    "runs affected" (runs.queries), over a longer window."""
    return runs_affected(tool=tool_name, start=start, end=end)


@dataclass(frozen=True)
class IncidentCharts:
    headline: Headline
    during: PeriodStats
    baseline: PeriodStats
    timeline: str  # figure JSON: duration and spend per run over time
    scatter: str  # figure JSON: duration against spend, by what the run met
    shown: int
    total: int
    unfinished: int
    baseline_start: datetime
    end: datetime


def incident_charts(
    *, incident: Incident, now: datetime | None = None, cap: int = MAX_CHART_RUNS
) -> IncidentCharts:
    """Runs that reached for the tool from one incident-length before it opened until it closed
    (or now): two queries, an aggregate and a sampled list."""
    end = incident.closed_at or now or timezone.now()
    opened = incident.opened_at
    length = max(end - opened, timedelta(seconds=1))
    start = opened - length
    tool = incident.tool.name
    runs = runs_reaching_for(tool_name=tool, start=start, end=end)
    # Baseline: runs over before the incident opened. A run that started before but was still
    # going met the incident, as the table's and the Outages page's figures count it.
    before = Q(finished_at__lt=opened)
    stats, unfinished = _period_stats(
        runs, [_Period("baseline", before, 0.001), _Period("during", ~before, 0.001)]
    )
    baseline, during = stats["baseline"], stats["during"]
    sample = sample_runs(runs, tool=tool, total=baseline.runs + during.runs, cap=cap)
    points = [
        RunPoint(x=started, duration_s=ms / 1000, spend_usd=_usd(spend), met=met)
        for started, ms, spend, met in sample.rows
    ]
    span = _length_text(length)
    headline = compare(
        during=during,
        reference=baseline,
        against=f"the {span} before it",
        missing=f"no finished run reached for the tool in the {span} before the incident",
    )
    note = sample.note(unfinished=sum(unfinished.values()))
    subtitle = (
        f"Runs started during the incident against the {span} before it: {headline.text}"
        if headline.compared
        else headline.text
    )
    timeline = charts.duration_and_spend_figure(
        points=points,
        outage=Span(opened, end, "incident" if incident.closed_at else "incident (ongoing)"),
        baseline=Span(start, opened, "baseline"),
        title="Run duration and model spend per run, before and during the incident",
        headline=subtitle,
        x_title="Run start (UTC)",
        baseline_duration_s=baseline.mean_duration_s,
        baseline_spend_usd=baseline.mean_spend_usd,
        note=note,
    )
    scatter = charts.met_scatter_figure(
        points=points,
        title="Each run: duration against model spend",
        subtitle="Coloured by what the run met when it reached for the tool",
        note=note,
    )
    return IncidentCharts(
        headline=headline,
        during=during,
        baseline=baseline,
        timeline=timeline,
        scatter=scatter,
        shown=len(points),
        total=sample.total,
        unfinished=sum(unfinished.values()),
        baseline_start=start,
        end=end,
    )


def _length_text(length: timedelta) -> str:
    seconds = int(length.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 2 * 3600:
        return f"{round(seconds / 60)} minutes"
    if seconds < 2 * 86_400:
        return f"{seconds / 3600:.1f} hours".replace(".0 ", " ")
    return f"{seconds / 86_400:.1f} days".replace(".0 ", " ")


# -- outage replays -------------------------------------------------------------------------------


def mode_label(mode: str) -> str:
    """A mode as figures show it: plotly renders some HTML in labels, so anything but the
    command's own mode names is reduced to plain word characters."""
    return mode if mode in MODES else re.sub(r"[^\w-]", "?", mode)[:30]


def _mode_order(mode: str) -> tuple[int, str]:
    return (MODES.index(mode) if mode in MODES else len(MODES), mode)


def _speed(replay: OutageReplay) -> float:
    """Real seconds times speed = the story's seconds (a corrupt speed counts as 1)."""
    speed = replay.speed
    return speed if speed and math.isfinite(speed) and speed > 0 else 1.0


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
        return sorted({_speed(replay) for replay in self.replays})


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
        ReplayBatch(tuple(sorted(group, key=lambda replay: _mode_order(replay.mode))))
        for group in groups
    ]
    return batches[::-1]


def recent_replay_batches(*, limit: int = MAX_REPLAYS_LISTED) -> list[ReplayBatch]:
    """The batches among the newest ``limit`` replays (one query)."""
    return group_replays(OutageReplay.objects.order_by("-started_at", "-pk")[:limit])


def mode_bar(replay: OutageReplay) -> ModeBar | None:
    """The replay's summary as bars, or None while it has none (running, or it failed)."""
    summary: dict[str, Any] = replay.summary if isinstance(replay.summary, dict) else {}
    in_window = "web_search_calls_in_window" in summary
    try:
        runs = int(summary["runs"])
        spend = float(summary["model_spend_usd"])
        mean = float(summary["mean_run_duration_s"])
        calls = int(summary["web_search_calls_in_window" if in_window else "web_search_calls"])
        attempts = int(summary.get("http_attempts") or 0)
    except (KeyError, TypeError, ValueError):
        return None
    if runs <= 0 or not (math.isfinite(spend) and math.isfinite(mean)):
        return None
    return ModeBar(mode_label(replay.mode), runs, spend / runs, mean, calls, attempts)


@dataclass(frozen=True)
class ModeChart:
    replay: OutageReplay
    stats: dict[str, PeriodStats]  # baseline, outage, after (by run start)
    headline: Headline
    figure: str  # figure JSON
    bar: ModeBar | None
    shown: int
    unfinished: int

    @property
    def element_id(self) -> str:
        return f"mode-{self.replay.pk}"

    @property
    def window_minutes(self) -> float:
        replay = self.replay
        seconds = (replay.outage_ended_at - replay.outage_started_at).total_seconds()
        return seconds * _speed(replay) / 60


@dataclass(frozen=True)
class OutageComparison:
    batch: ReplayBatch
    modes: list[ModeChart]
    bars: str | None  # figure JSON; None when no replay of the batch has a summary
    scatter: str
    shown: int
    total: int
    note: str | None


def _minutes_since(replay: OutageReplay, moment: datetime) -> float:
    return (moment - replay.started_at).total_seconds() * _speed(replay) / 60


def _replay_periods(replay: OutageReplay) -> list[_Period]:
    mine = Q(worker__worker_id__startswith=replay.worker_prefix)
    scale = _speed(replay) / 1000
    start, end = replay.outage_started_at, replay.outage_ended_at
    return [
        _Period(f"{replay.pk}:baseline", mine & Q(started_at__lt=start), scale),
        _Period(f"{replay.pk}:outage", mine & Q(started_at__gte=start, started_at__lt=end), scale),
        _Period(f"{replay.pk}:after", mine & Q(started_at__gte=end), scale),
    ]


def _replay_headline(
    replay: OutageReplay, stats: dict[str, PeriodStats], none: dict[str, PeriodStats] | None
) -> Headline:
    if replay.mode == "none":
        return compare(
            during=stats["outage"],
            reference=stats["baseline"],
            against="its own runs before the outage",
            missing="no finished runs before the outage",
        )
    return compare(
        during=stats["outage"],
        reference=None if none is None else none["outage"],
        against="mode none (no breaker)",
        missing="this batch has no finished replay in mode none",
    )


def _last_start_note(replay: OutageReplay) -> str:
    """Why the outage's last minutes have no run starts (issue 14: a new user asked)."""
    story = Scenario.from_record(replay.scenario if isinstance(replay.scenario, dict) else {})
    last = story.last_window_start_s() / 60
    window = story.window_s / 60
    if window - last < 1:
        return ""
    # <br>: plotly does not wrap annotations; the text is ours, never agent-sent.
    return (
        f"No run starts after minute {last:.0f} of the {window:g}-minute outage: the story's "
        f"runs start early enough to finish inside it<br>with every search failing (such a run "
        f"takes {story.failing_run_s / 60:.1f} minutes); runs after the outage show the recovery."
    )


def outage_comparison(
    *, batch: ReplayBatch, tool: str = SEARCH, cap: int = MAX_CHART_RUNS
) -> OutageComparison:
    """Every mode of one batch: two queries over the batch's runs (an aggregate per replay and
    period, and one sampled list), whatever the number of runs."""
    replays = list(batch.replays)
    prefixes = Q()
    for replay in replays:
        prefixes |= Q(worker_id__startswith=replay.worker_prefix)
    runs = Run.objects.filter(worker__in=Worker.objects.filter(prefixes).values("pk"))
    periods = [period for replay in replays for period in _replay_periods(replay)]
    flat, unfinished = _period_stats(runs, periods)
    stats = {
        replay.pk: {name: flat[f"{replay.pk}:{name}"] for name in ("baseline", "outage", "after")}
        for replay in replays
    }
    # The longest prefix first, so a prefix that starts another one's never steals its runs.
    by_prefix = sorted(replays, key=lambda replay: -len(replay.worker_prefix))
    which = Case(
        *[When(worker__worker_id__startswith=r.worker_prefix, then=Value(r.pk)) for r in by_prefix],
        default=Value(0),
        output_field=IntegerField(),
    )
    total = sum(s.runs for per_replay in stats.values() for s in per_replay.values())
    sample = sample_runs(runs, tool=tool, total=total, cap=cap, fields=("replay",), replay=which)
    by_pk = {replay.pk: replay for replay in replays}
    points: dict[int, list[RunPoint]] = {replay.pk: [] for replay in replays}
    for started, ms, spend, met, replay_pk in sample.rows:
        owner = by_pk.get(replay_pk)
        if owner is None:  # a worker that no longer matches a prefix (renamed): not drawn
            continue
        points[owner.pk].append(
            RunPoint(
                x=_minutes_since(owner, started),
                duration_s=ms / 1000 * _speed(owner),
                spend_usd=_usd(spend),
                met=met,
                group=mode_label(owner.mode),
            )
        )
    all_points = [point for replay in replays for point in points[replay.pk]]
    # The same scales for every mode, so their panels can be read against each other.
    duration_max = max((p.duration_s for p in all_points), default=0.0)
    spend_max = max((p.spend_usd for p in all_points), default=0.0)
    x_max = max(
        [float(p.x) for p in all_points if isinstance(p.x, float)]
        + [_minutes_since(r, r.outage_ended_at) for r in replays]
    )
    none = next((stats[r.pk] for r in replays if r.mode == "none"), None)
    unfinished_total = sum(unfinished.values())
    modes = []
    for replay in replays:
        mine = stats[replay.pk]
        headline = _replay_headline(replay, mine, none)
        left_out = sum(
            unfinished[f"{replay.pk}:{name}"] for name in ("baseline", "outage", "after")
        )
        figure = charts.duration_and_spend_figure(
            points=points[replay.pk],
            outage=Span(
                _minutes_since(replay, replay.outage_started_at),
                _minutes_since(replay, replay.outage_ended_at),
                "outage",
            ),
            baseline=Span(0.0, _minutes_since(replay, replay.outage_started_at), "baseline"),
            title=f"Mode {mode_label(replay.mode)}: run duration and model spend per run",
            headline=(
                f"Outage-window runs against {headline.against}: {headline.text}"
                if headline.compared
                else headline.text
            ),
            x_title="Run start: minutes since the replay began (simulated)",
            baseline_duration_s=mine["baseline"].mean_duration_s,
            baseline_spend_usd=mine["baseline"].mean_spend_usd,
            note="<br>".join(
                part
                for part in (
                    _last_start_note(replay),
                    sampling_note(
                        shown=len(points[replay.pk]),
                        total=sum(period.runs for period in mine.values()),
                        stride=sample.stride,
                        unfinished=left_out,
                    ),
                )
                if part
            ),
            duration_max_s=duration_max,
            spend_max_usd=spend_max,
            x_range=(0.0, x_max),
            height=380,
        )
        modes.append(
            ModeChart(
                replay=replay,
                stats=mine,
                headline=headline,
                figure=figure,
                bar=mode_bar(replay),
                shown=len(points[replay.pk]),
                unfinished=left_out,
            )
        )
    bars = [mode.bar for mode in modes if mode.bar is not None]
    note = sample.note(unfinished=unfinished_total)
    return OutageComparison(
        batch=batch,
        modes=modes,
        bars=charts.mode_comparison_figure(
            bars=bars,
            title="Breaker modes side by side: spend, duration and vendor calls",
            subtitle=(
                "Runs started in the outage window, from each replay's summary. Faster is "
                "not cheaper: compare the first two panels."
            ),
        )
        if bars
        else None,
        scatter=charts.met_scatter_figure(
            points=all_points,
            title="Each run of this batch: duration against model spend",
            subtitle="Every mode together, coloured by what the run met (hover for its mode)",
            note=note,
        ),
        shown=len(all_points),
        total=sample.total,
        note=note,
    )


@dataclass(frozen=True)
class OutagesPage:
    batches: list[ReplayBatch]  # newest first
    selected: ReplayBatch | None
    comparison: OutageComparison | None


def outages_page(*, batch_key: int | None = None, compare: bool = True) -> OutagesPage:
    """The replay batches to choose from and the chosen one (the newest by default), compared.
    A key that names no batch among the newest replays raises ``LookupError``."""
    batches = recent_replay_batches()
    if not compare:
        return OutagesPage(batches=batches, selected=None, comparison=None)
    if batch_key is None:
        selected = batches[0] if batches else None
    else:
        selected = next((batch for batch in batches if batch.key == batch_key), None)
        if selected is None:
            raise LookupError(f"no replay batch {batch_key} among the newest replays")
    comparison = outage_comparison(batch=selected) if selected is not None else None
    return OutagesPage(batches=batches, selected=selected, comparison=comparison)
