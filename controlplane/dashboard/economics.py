"""The outage economics charts: an incident's runs and a batch of replays drawn as duration and
spend side by side (``runs.outage_economics`` computes the figures, ``breakers.replay.outage``
reads the replays). Every chart draws a bounded sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import (
    Case,
    ExpressionWrapper,
    F,
    IntegerField,
    Q,
    QuerySet,
    Value,
    When,
    Window,
)
from django.db.models.functions import RowNumber
from django.utils import timezone

from breakers.models import Incident
from breakers.replay.outage import (
    PROVIDERS,
    SEARCH,
    ReplayBatch,
    ReplayClock,
    ReplayResult,
    minutes_since,
    mode_label,
    recent_replay_batches,
    replay_interrupted,
    replay_periods,
)
from controlplane.dashboard import charts
from controlplane.dashboard.charts import ModeBar, RunPoint, Span
from controlplane.dashboard.incidents import ReplayWindow, measured_windows
from runs.models import OutageReplay, Run, Worker
from runs.outage_economics import (
    Headline,
    Period,
    PeriodStats,
    classified_runs,
    compare,
    period_stats,
    runs_reaching_for,
    usd,
)

MAX_CHART_RUNS = 5_000


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
    *,
    incident: Incident,
    now: datetime | None = None,
    cap: int = MAX_CHART_RUNS,
    window: ReplayWindow | None = None,
) -> IncidentCharts:
    """Runs that reached for the tool from one incident-length before it opened until it closed
    (or now), kept inside ``window`` for an incident of an outage replay (the incident page's
    own windows): two queries, an aggregate and a sampled list."""
    start, opened, end = measured_windows(
        incident=incident, end=incident.closed_at or now or timezone.now(), window=window
    )
    length = max(end - opened, timedelta(seconds=1))
    tool = incident.tool.name
    runs = runs_reaching_for(tool_name=tool, start=start, end=end)
    # Baseline: runs over before the incident opened. A run that started before but was still
    # going met the incident, as the table's and the Outages page's figures count it.
    before = Q(finished_at__lt=opened)
    # A replay's runs in real seconds, less the time its clock stood still (ReplayClock).
    replay = window.replay if window is not None else None
    clock = ReplayClock.of(replay) if replay is not None else None
    stats, unfinished = period_stats(
        runs,
        [Period("baseline", before, 0.001), Period("during", ~before, 0.001)],
        clocks={replay.worker_prefix: clock} if replay is not None and clock is not None else None,
    )
    baseline, during = stats["baseline"], stats["during"]
    sample = sample_runs(
        runs, tool=tool, total=baseline.runs + during.runs, cap=cap, fields=("worker__worker_id",)
    )
    points = [
        RunPoint(
            x=started,
            duration_s=_real_s(clock, replay, started, ms, worker),
            spend_usd=usd(spend),
            met=met,
        )
        for started, ms, spend, met, worker in sample.rows
    ]
    before_length = max(opened - start, timedelta(seconds=1))
    span = _length_text(before_length)
    if before_length < length:  # kept inside its replay (ReplayWindow)
        span += ", since the replay began"
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


def _real_s(
    clock: ReplayClock | None, replay: OutageReplay | None, started: datetime, ms: int, worker: str
) -> float:
    """A run's real duration; a replay's own runs' without the time its clock stood still
    (``clock`` is that replay's, None without a replay)."""
    if clock is None or replay is None or not worker.startswith(replay.worker_prefix):
        return ms / 1000
    return ms / 1000 - clock.paused_s(started, ms)


def _length_text(length: timedelta) -> str:
    seconds = int(length.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 2 * 3600:
        return f"{round(seconds / 60)} minutes"
    if seconds < 2 * 86_400:
        return f"{seconds / 3600:.1f} hours".replace(".0 ", " ")
    return f"{seconds / 86_400:.1f} days".replace(".0 ", " ")


def mode_bar(replay: OutageReplay) -> ModeBar | None:
    """The replay's summary as bars, or None while it has none (running, or it failed)."""
    result = ReplayResult.of(replay)
    runs, spend, mean = result.runs, result.model_spend_usd, result.mean_run_duration_s
    calls = result.window_vendor_calls
    if runs is None or spend is None or mean is None or calls is None or runs < 1:
        return None
    attempts = int(result.http_attempts or 0)
    return ModeBar(
        mode_label(replay.mode), int(runs), spend / int(runs), mean, int(calls), attempts
    )


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
    def cached_spend(self) -> dict[str, float | None]:
        """The outage-window runs' spend priced with each provider's cache rates (way remove),
        from the replay's summary; {} for replays older than those figures."""
        caching = ReplayResult.of(self.replay).caching
        if not caching:
            return {}
        return {p: _finite(caching.get(p, {}).get("spend_usd")) for p in PROVIDERS}

    @property
    def status(self) -> str:
        """ "finished", "playing" or "interrupted" (stopped half-played)."""
        if replay_interrupted(self.replay):
            return "interrupted"
        return "finished" if self.replay.finished_at else "playing"


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class OutageComparison:
    batch: ReplayBatch
    modes: list[ModeChart]
    bars: str | None  # figure JSON; None when no replay of the batch has a summary
    scatter: str
    shown: int
    total: int
    note: str | None

    @property
    def has_caching(self) -> bool:
        """Whether any mode carries prompt-caching figures (replays older than them do not)."""
        return any(mode.cached_spend for mode in self.modes)


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
    story = ReplayResult.of(replay).scenario
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
    periods = [period for replay in replays for period in replay_periods(replay)]
    # Built once: a replay's clock may hold thousands of pauses (its runs' holds).
    clocks = {replay.worker_prefix: ReplayClock.of(replay) for replay in replays}
    flat, unfinished = period_stats(runs, periods, clocks=clocks)
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
                x=minutes_since(owner, started, clock=clocks[owner.worker_prefix]),
                duration_s=clocks[owner.worker_prefix].run_seconds(started, ms),
                spend_usd=usd(spend),
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
        + [minutes_since(r, r.outage_ended_at, clock=clocks[r.worker_prefix]) for r in replays]
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
        clock = clocks[replay.worker_prefix]
        outage_start = minutes_since(replay, replay.outage_started_at, clock=clock)
        figure = charts.duration_and_spend_figure(
            points=points[replay.pk],
            outage=Span(
                outage_start, minutes_since(replay, replay.outage_ended_at, clock=clock), "outage"
            ),
            baseline=Span(0.0, outage_start, "baseline"),
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
    """The replay batches to choose from and the chosen one (by default the newest that was
    played through), compared.
    A key that names no batch among the newest replays raises ``LookupError``."""
    batches = recent_replay_batches()
    if not compare:
        return OutagesPage(batches=batches, selected=None, comparison=None)
    if batch_key is None:
        # The newest batch that was played through: never a half-played one, which would stay
        # the default for good once its command was stopped. While the first batch plays, it.
        complete = (batch for batch in batches if batch.status() == "complete")
        selected = next(complete, batches[0] if batches else None)
    else:
        selected = next((batch for batch in batches if batch.key == batch_key), None)
        if selected is None:
            raise LookupError(f"no replay batch {batch_key} among the newest replays")
    comparison = outage_comparison(batch=selected) if selected is not None else None
    return OutagesPage(batches=batches, selected=selected, comparison=comparison)
