"""Outage economics from the runs: what each run met when a tool broke (refused fast, tool removed,
failed through, healthy), bounded aggregates of duration and spend per period, the headline that
compares them each with its own denominator. It knows nothing of who played the runs: a clock
that stood still (an outage replay's) comes in as a ``PausedClock``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, NamedTuple, Protocol

from django.db.models import Avg, Case, CharField, Count, Exists, OuterRef, Q, QuerySet, Value, When

from runs.incident_runs import runs_affected
from runs.models import FAILED_OUTCOMES, BreakerState, Outcome, ReportedTransition, Run, ToolCall

# What a run met when it reached for the broken tool (the rules: this module's ``met_case``).
MET_HEALTHY = "healthy tool"


MET_FAILED_THROUGH = "failed through"


MET_REFUSED_FAST = "refused fast"


MET_TOOL_REMOVED = "tool removed"


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
    change = percent_change(reference_usd, during_usd)
    if change is None:
        if during_usd <= 0:
            return "model spend per run changed by 0%", 0.0
        return f"model spend per run went from $0 to ${during_usd:,.4f}", None
    return f"model spend per run changed by {percent_text(change)}", change


def percent_change(reference: float, value: float) -> float | None:
    """How far ``value`` moved from ``reference``, in percent of ``reference``: the one
    denominator every page's "+N%" and "rose by N%" use. None when the reference is not above 0."""
    if reference <= 0:
        return None
    return (value - reference) / reference * 100


def percent_text(change: float) -> str:
    """A change in percent as the pages print it: "+520%", "-4.5%", "0%"."""
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
        When(
            Exists(calls.filter(outcome__in=FAILED_OUTCOMES)),
            then=Value(MET_FAILED_THROUGH),
        ),
        default=Value(MET_HEALTHY),
        output_field=CharField(),
    )


def classified_runs(runs: QuerySet[Run], *, tool: str) -> QuerySet[Any]:
    """``runs`` with ``met`` annotated: what each one met with ``tool``."""
    return runs.annotate(met=met_case(tool))


class PausedClock(Protocol):
    """A clock that stood still now and then: the runs it timed are measured without the stops."""

    @property
    def paused(self) -> bool: ...

    @property
    def starts(self) -> tuple[float, ...]: ...  # each stop's start and end, Unix seconds, in order

    @property
    def ends(self) -> tuple[float, ...]: ...

    def paused_s(self, started_at: datetime, duration_ms: int | float) -> float: ...


class Period(NamedTuple):
    key: str
    condition: Q
    seconds_per_ms: float  # 1/1000, times a compressed clock's speed for its own seconds


def period_stats(
    runs: QuerySet[Run],
    periods: Sequence[Period],
    *,
    clocks: Mapping[str, PausedClock] | None = None,
) -> tuple[dict[str, PeriodStats], dict[str, int]]:
    """One aggregate query: per period, the finished runs' count, mean duration and mean spend,
    and how many runs have not finished (no duration yet, so they are not drawn).

    ``clocks`` maps a worker id prefix to the clock its runs are measured on (an outage replay's):
    for each clock that paused, one more query reads those workers' runs that overlap the pauses
    and takes each one's share of them out of its period's mean."""
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
    runs: QuerySet[Run], periods: Sequence[Period], clocks: Mapping[str, PausedClock]
) -> dict[str, float]:
    """Per period key, the real milliseconds of the clocks' pauses inside their finished runs."""
    which = Case(
        *[When(period.condition, then=Value(period.key)) for period in periods],
        default=Value(""),
        output_field=CharField(),
    )
    paused: dict[str, float] = {}
    for worker_prefix, clock in clocks.items():
        if not clock.paused:
            continue
        overlapping = runs.filter(
            worker__worker_id__startswith=worker_prefix,
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
