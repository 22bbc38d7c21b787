"""The outage ledger of one tool's incident: what the runs that discovered the failure spent and
took, what runs spent while the tool was hidden from them, and an estimate of the spend that
hiding it avoided, with its range and the method written beside it.

The estimate compares each run with what a run that meets the failing tool and keeps it would
have spent ("a failing run"): measured from such runs when the incident has enough of them,
otherwise extrapolated from the cost of each model call by its step to the runs' step budget
(docs/adr/0204-outage-ledger-estimator.md). Runs hidden after the last failure anyone saw may
have met a vendor that was already back: they count at a healthy run's spend in the point
estimate and the low end, at a failing run's in the high end. A handful of aggregate queries,
however many runs the incident touched, and as many for any number of incidents
(``outage_ledgers``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Context, Decimal
from typing import Any

from django.db import connection
from django.db.models import (
    Avg,
    BooleanField,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Value,
)

from runs.incident_runs import runs_affected
from runs.models import (
    FAILED_OUTCOMES,
    BreakerState,
    CostSource,
    ModelCall,
    Outcome,
    ReportedTransition,
    Run,
    ToolCall,
)

__all__ = (
    "MIN_MEASURED_RUNS",
    "FailingRunCost",
    "LedgerWindow",
    "OutageLedger",
    "outage_ledger",
    "outage_ledgers",
)

# Runs that met the failure and kept the tool to their end, below which their mean is too
# uncertain to stand for every hidden run; the step extrapolation is used instead.
MIN_MEASURED_RUNS = 5
# Steps of the per-step cost fit (a run's steps past this are not read).
MAX_FIT_STEP = 1000
# The 95% interval of a mean, in standard errors.
_Z95 = 1.96


@dataclass(frozen=True)
class FailingRunCost:
    """What a run that meets the failing tool and keeps it would spend: point, low, high."""

    usd: float
    low: float
    high: float
    method: str  # "measured" or "extrapolated" (or "none": nothing to estimate from)
    text: str  # the method, in words, with its inputs


@dataclass(frozen=True)
class OutageLedger:
    start: datetime  # the first failure of the streak (or the opening)
    end: datetime
    # Runs that hit the failing tool (a retryable failure) before it was hidden from them.
    discovery_runs: int
    discovery_spend_usd: Decimal
    discovery_duration_s: float  # their summed run time, start to finish (real seconds)
    # Runs that lost the tool (removed or refused) without a failure of their own.
    hidden_runs: int
    hidden_spend_usd: Decimal
    unfinished_runs: int  # still going: not in the estimate (their spend is not final)
    unpriced_calls: int  # model calls of these runs whose price is unknown
    failures_seen_until: datetime | None  # the last failure of the tool anyone saw
    uncertain_runs: int  # hidden after that: the vendor may already have been back
    failing_run: FailingRunCost
    healthy_run_usd: float | None  # mean spend of a run that used the tool before the failure
    avoided_usd: float | None
    avoided_low_usd: float | None
    avoided_high_usd: float | None

    @property
    def spend_per_hidden_run_usd(self) -> Decimal | None:
        return self.hidden_spend_usd / self.hidden_runs if self.hidden_runs else None

    @property
    def estimated(self) -> bool:
        return self.avoided_usd is not None

    @property
    def method_text(self) -> str:
        """How the estimate was made, for the page and the Slack message."""
        if not self.estimated:
            return self.failing_run.text
        parts = [
            "Spend avoided = for each run that lost the tool, what a failing run spends "
            f"({self.failing_run.text}) less what it spent.",
        ]
        if self.uncertain_runs:
            healthy = (
                f"${self.healthy_run_usd:,.4f}" if self.healthy_run_usd is not None else "its own"
            )
            parts.append(
                f"{self.uncertain_runs} run(s) lost the tool after the last failure anyone saw, "
                "when the vendor may already have been back: the estimate counts each at a "
                "failing run's spend with the odds that the vendor was still down when it "
                "started (the vendor came back at any moment until the first success seen, "
                f"each as likely), else at a healthy run's ({healthy}); the low end counts them "
                "all healthy, the high end all failing."
            )
        if self.unfinished_runs:
            parts.append(f"{self.unfinished_runs} run(s) still going are left out.")
        if self.unpriced_calls:
            parts.append(f"{self.unpriced_calls} model call(s) had no known price (counted $0).")
        return " ".join(parts)


@dataclass(frozen=True)
class LedgerWindow:
    """One ledger to compute (``outage_ledger``'s arguments)."""

    tool: str
    start: datetime
    end: datetime
    baseline_start: datetime | None = None
    failures_seen_until: datetime | None = None


def outage_ledger(
    *,
    tool: str,
    start: datetime,
    end: datetime,
    baseline_start: datetime | None = None,
    failures_seen_until: datetime | None = None,
) -> OutageLedger:
    """The ledger of ``tool`` over [start, end): ``start`` is the first failure of the streak
    (or the opening), ``baseline_start`` where healthy runs are looked for (before ``start``),
    ``failures_seen_until`` a failure seen outside the runs (a failed probe), if later."""
    window = LedgerWindow(tool, start, end, baseline_start, failures_seen_until)
    return outage_ledgers([window])[0]


def outage_ledgers(windows: Sequence[LedgerWindow]) -> list[OutageLedger]:
    """The ledgers of many windows, each exactly as ``outage_ledger`` computes it, in a bounded
    number of queries however many windows there are: each step runs every window's own query
    as one ``UNION ALL`` (``_per_window``)."""
    if not windows:
        return []
    runs = [
        _classified(runs_affected(tool=w.tool, start=w.start, end=w.end), w.tool, w.start, w.end)
        for w in windows
    ]
    failures = _one_each(
        {
            i: _tagged(
                ToolCall.objects.filter(
                    tool=w.tool, outcome__in=FAILED_OUTCOMES, ts__gte=w.start, ts__lt=w.end
                ),
                i,
            ).annotate(at=Max("ts"))
            for i, w in enumerate(windows)
        },
        ("at",),
    )
    last_failures: list[datetime | None] = []
    for i, w in enumerate(windows):
        last = failures[i]["at"]
        seen = w.failures_seen_until
        if seen is not None and (last is None or seen > last):
            last = min(seen, w.end)
        last_failures.append(last)
    successes = _one_each(
        {
            i: _tagged(
                ToolCall.objects.filter(
                    tool=w.tool, outcome=Outcome.SUCCESS, ts__gt=last_failures[i], ts__lt=w.end
                ),
                i,
            ).annotate(at=Min("ts"))
            for i, w in enumerate(windows)
            if last_failures[i] is not None
        },
        ("at",),
    )
    back_by = [successes.get(i, {}).get("at") or w.end for i, w in enumerate(windows)]
    sums = _run_sums(runs, last_failures)
    uncertain = _uncertain_sums(runs, sums, last_failures, back_by)
    failing = _failing_run_costs(runs, windows, sums)
    healthy = _healthy_means(windows)
    ledgers = []
    for i, w in enumerate(windows):
        rows = sums[i]
        estimate = _estimate(rows, uncertain[i], failing[i], healthy[i])
        ledgers.append(
            OutageLedger(
                start=w.start,
                end=w.end,
                discovery_runs=rows["d_n"],
                discovery_spend_usd=rows["d_spend"] or Decimal(0),
                discovery_duration_s=(rows["d_ms"] or 0) / 1000,
                hidden_runs=rows["h_n"],
                hidden_spend_usd=rows["h_spend"] or Decimal(0),
                unfinished_runs=rows["unfinished"],
                unpriced_calls=rows["unpriced"] or 0,
                failures_seen_until=last_failures[i],
                uncertain_runs=uncertain[i]["n"],
                failing_run=failing[i],
                healthy_run_usd=healthy[i],
                avoided_usd=estimate[0] if estimate else None,
                avoided_low_usd=estimate[1] if estimate else None,
                avoided_high_usd=estimate[2] if estimate else None,
            )
        )
    return ledgers


def _tagged(queryset: QuerySet[Any], index: int) -> QuerySet[Any]:
    """``queryset`` grouped by nothing but a constant, its window's index: aggregates annotated
    next are the whole queryset's, as ``aggregate()`` would compute them."""
    return queryset.annotate(window=Value(index, output_field=IntegerField())).values("window")


def _per_window(parts: Mapping[int, QuerySet[Any]]) -> dict[int, list[dict[str, Any]]]:
    """Every window's query (``values()`` rows, tagged with ``window``) as one ``UNION ALL``;
    the rows, by window."""
    rows: dict[int, list[dict[str, Any]]] = {i: [] for i in parts}
    if not parts:
        return rows
    first, *others = parts.values()
    combined = first.union(*others, all=True) if others else first
    for row in combined:
        rows[row["window"]].append(row)
    return rows


def _one_each(
    parts: Mapping[int, QuerySet[Any]], names: Sequence[str] | Mapping[str, Any]
) -> dict[int, dict[str, Any]]:
    """Aggregate-only queries: one row per window (a row of Nones should a database give none)."""
    blank = dict.fromkeys(names)
    return {i: (found[0] if found else blank) for i, found in _per_window(parts).items()}


def _classified(runs: QuerySet[Run], tool: str, start: datetime, end: datetime) -> QuerySet[Any]:
    failed = ToolCall.objects.filter(
        run=OuterRef("pk"), tool=tool, outcome__in=FAILED_OUTCOMES, ts__gte=start, ts__lt=end
    )
    removed = ReportedTransition.objects.filter(
        run=OuterRef("pk"), tool=tool, state=BreakerState.OPEN
    )
    refused = ToolCall.objects.filter(run=OuterRef("pk"), tool=tool, outcome=Outcome.BLOCKED)
    return runs.annotate(hit=Exists(failed), lost=Exists(removed) | Exists(refused))


_FINISHED = Q(duration_ms__isnull=False)
_DISCOVERY = Q(hit=True)
_HIDDEN = Q(hit=False, lost=True)


# Per window, over its classified runs as ``_run_sums`` reads them: (SQL aggregate, column,
# which runs). Discovery: the run hit the failure; hidden: it lost the tool without a failure.
_D, _H, _F = '"hit"', '(NOT "hit" AND "lost")', '"ms" IS NOT NULL'
_RUN_SUMS: dict[str, tuple[str, str, str]] = {
    "d_n": ("COUNT", "1", _D),
    "d_spend": ("SUM", '"spend"', _D),
    "d_ms": ("SUM", '"ms"', f"{_D} AND {_F}"),
    "h_n": ("COUNT", "1", _H),
    "h_spend": ("SUM", '"spend"', _H),
    # What the estimate adds up: finished runs only.
    "r_n": ("COUNT", "1", f'{_D} AND "lost" AND {_F}'),
    "r_spend": ("SUM", '"spend"', f'{_D} AND "lost" AND {_F}'),
    "k_n": ("COUNT", "1", f'{_D} AND NOT "lost" AND {_F}'),
    "hf_n": ("COUNT", "1", f"{_H} AND {_F}"),
    "hf_spend": ("SUM", '"spend"', f"{_H} AND {_F}"),
    "unfinished": ("COUNT", "1", f"({_D} OR {_H}) AND NOT ({_F})"),
    "unpriced": ("SUM", '"unpriced_n"', f"{_D} OR {_H}"),
    # The failing runs measured: those that met the failure and kept the tool to their end.
    "kept_mean": ("AVG", '"spend"', f'{_D} AND NOT "lost" AND {_F}'),
    # Their spread from sums, not STDDEV_SAMP: SQLite has none of its own, and Django's Python
    # stand-in fails on the NULLs of the other runs (``_sample_sd``).
    "kept_sum": ("SUM", '"spend"', f'{_D} AND NOT "lost" AND {_F}'),
    "kept_sq": ("SUM", '"spend" * "spend"', f'{_D} AND NOT "lost" AND {_F}'),
    # Hidden runs that started after the window's last failure seen ("after": per window).
    "u_n": ("COUNT", "1", f'{_H} AND {_F} AND "after"'),
    "u_spend": ("SUM", '"spend"', f'{_H} AND {_F} AND "after"'),
}
_DECIMALS = {"d_spend", "h_spend", "r_spend", "hf_spend", "kept_mean", "u_spend"}
_INTEGERS = {"d_ms", "unpriced"}


def _run_sums(
    runs: Sequence[QuerySet[Any]], last_failures: Sequence[datetime | None]
) -> list[dict[str, Any]]:
    """Per window, the sums over its classified runs (``_RUN_SUMS``): every window's runs as one
    ``UNION ALL`` (Django's SQL), grouped by window, so each run is classified once (its
    ``EXISTS`` evaluated once, not once per sum) and the query's size grows only with its parts.
    The outer query is written here: Django aggregates over a union only into one row, with as
    many expressions as windows times sums, which it takes seconds to build."""
    parts = [
        r.annotate(
            w=Value(i, output_field=IntegerField()),
            # Compared by the ORM, to the microsecond on every backend (SQLite's datetime cast
            # keeps milliseconds), and typed alike in every part of the union.
            after=_started_after(last_failures[i]),
            spend=F("model_spend_usd"),
            ms=F("duration_ms"),
            unpriced_n=F("unpriced_calls"),
        ).values("w", "hit", "lost", "spend", "ms", "unpriced_n", "after")
        for i, r in enumerate(runs)
    ]
    first, *others = parts
    combined = first.union(*others, all=True) if others else first
    inner, params = combined.query.sql_with_params()
    columns = ", ".join(
        f"{function}(CASE WHEN {which} THEN {value} END) AS {name}"
        for name, (function, value, which) in _RUN_SUMS.items()
    )
    sql = f'SELECT "w", {columns} FROM ({inner}) runs_by_window GROUP BY "w"'
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = {row[0]: dict(zip(_RUN_SUMS, row[1:], strict=True)) for row in cursor.fetchall()}
    blank = dict.fromkeys(_RUN_SUMS) | {
        name: 0 for name, spec in _RUN_SUMS.items() if spec[0] == "COUNT"
    }
    return [_typed(found.get(i, blank)) for i in range(len(runs))]


def _started_after(last: datetime | None) -> Any:
    """Whether a run started after ``last`` (never, when there is no last failure)."""
    if last is None:
        return Value(False, output_field=BooleanField())
    return ExpressionWrapper(Q(started_at__gt=last), output_field=BooleanField())


def _sample_sd(n: int | None, total: Any, squares: Any) -> float | None:
    """The sample standard deviation of ``n`` values from their sum and sum of squares."""
    if not n or n < 2 or total is None or squares is None:
        return None
    total, squares = float(total), float(squares)
    return math.sqrt(max(0.0, (squares - total * total / n) / (n - 1)))


_SPEND_PLACES = Decimal(1).scaleb(-Run._meta.get_field("model_spend_usd").decimal_places)  # type: ignore[union-attr]


def _typed(row: Mapping[str, Any]) -> dict[str, Any]:
    """Raw values as Django reads them: spend as Decimal (SQLite hands back floats), counts and
    milliseconds as int."""
    typed = dict(row)
    for name, value in row.items():
        if value is None:
            continue
        if name in _DECIMALS and not isinstance(value, Decimal):
            typed[name] = (
                Context(prec=15).create_decimal_from_float(float(value)).quantize(_SPEND_PLACES)
            )
        elif name in _INTEGERS or _RUN_SUMS[name][0] == "COUNT":
            typed[name] = int(value)
    return typed


def _uncertain_sums(
    runs: Sequence[QuerySet[Any]],
    sums: Sequence[Mapping[str, Any]],
    last_failures: Sequence[datetime | None],
    back_by: Sequence[datetime],
) -> list[dict[str, Any]]:
    """Per window: finished hidden runs that started after the last failure seen, and how likely
    the vendor was still down at each one's start: the vendor came back at some moment between
    the last failure and ``back_by`` (the first success seen, or the end), each as likely as the
    other, so a run that started a third of the way in met it still down with odds of two in
    three."""
    after = {
        i: _HIDDEN & _FINISHED & Q(started_at__gt=last)
        for i, last in enumerate(last_failures)
        if last is not None
    }
    starts = _per_window(
        {
            i: runs[i]
            .filter(q, started_at__lt=back_by[i])
            .annotate(window=Value(i, output_field=IntegerField()))
            .values("window", "started_at")
            for i, q in after.items()
        }
    )
    result = []
    for i, last in enumerate(last_failures):
        if last is None:
            result.append({"n": 0, "spend": Decimal(0), "down": 0.0})
            continue
        span = (back_by[i] - last).total_seconds()
        down = 0.0
        if span > 0:
            down = sum((back_by[i] - row["started_at"]).total_seconds() / span for row in starts[i])
        n, spend = sums[i]["u_n"], sums[i]["u_spend"]
        result.append({"n": n or 0, "spend": spend or Decimal(0), "down": down})
    return result


def _healthy_means(windows: Sequence[LedgerWindow]) -> list[float | None]:
    """Per window: mean spend of the finished runs that used the tool without a failure before
    its start, from its ``baseline_start``."""
    parts = {}
    for i, w in enumerate(windows):
        if w.baseline_start is None or w.baseline_start >= w.start:
            continue
        runs = _classified(
            runs_affected(tool=w.tool, start=w.baseline_start, end=w.start),
            w.tool,
            w.baseline_start,
            w.start,
        )
        healthy = runs.filter(
            Q(hit=False, lost=False, duration_ms__isnull=False, finished_at__lt=w.start)
        )
        parts[i] = _tagged(healthy, i).annotate(mean=Avg("model_spend_usd"))
    means = _one_each(parts, ("mean",))
    return [
        None if means.get(i, {}).get("mean") is None else float(means[i]["mean"])
        for i in range(len(windows))
    ]


def _failing_run_costs(
    runs: Sequence[QuerySet[Any]],
    windows: Sequence[LedgerWindow],
    sums: Sequence[Mapping[str, Any]],
) -> list[FailingRunCost]:
    """Per window: what a run that meets the failing tool and keeps it would spend (see the
    module doc); measured where at least ``MIN_MEASURED_RUNS`` such runs finished."""
    kept = [
        {
            "n": s["k_n"],
            "mean": s["kept_mean"],
            "sd": _sample_sd(s["k_n"], s["kept_sum"], s["kept_sq"]),
        }
        for s in sums
    ]
    costs: dict[int, FailingRunCost] = {}
    for i in range(len(windows)):
        row = kept[i]
        if (row["n"] or 0) >= MIN_MEASURED_RUNS:
            mean, sd, n = float(row["mean"]), float(row["sd"] or 0), row["n"]
            margin = _Z95 * sd / math.sqrt(n)
            costs[i] = FailingRunCost(
                mean,
                max(0.0, mean - margin),
                mean + margin,
                "measured",
                f"measured: the mean of the {n} runs that met the failure and kept the tool to "
                f"their end, ${mean:,.4f}, with its 95% interval",
            )
    rest = [i for i in range(len(windows)) if i not in costs]
    costs.update(_extrapolated(runs, windows, rest))
    return [costs[i] for i in range(len(windows))]


def _extrapolated(
    runs: Sequence[QuerySet[Any]], windows: Sequence[LedgerWindow], which: Sequence[int]
) -> dict[int, FailingRunCost]:
    """A failing run uses its whole step budget (the runs' most common one; else the most steps
    any of them took): each step's model call priced by a straight-line fit of cost on step over
    the model calls of the runs that reached for the tool, since context grows step by step. The
    low end assumes the context stops growing past the last step seen."""
    per_step = _per_window(
        {
            i: ModelCall.objects.filter(
                run_id__in=runs_affected(
                    tool=windows[i].tool,
                    start=windows[i].baseline_start or windows[i].start,
                    end=windows[i].end,
                ).values("pk"),
                step__isnull=False,
                step__lte=MAX_FIT_STEP,
            )
            .exclude(cost_source=CostSource.UNKNOWN)
            .annotate(window=Value(i, output_field=IntegerField()))
            .values("window", "step")
            .annotate(n=Count("pk"), mean=Avg("cost_usd"))
            for i in which
        }
    )
    budgets = _step_budgets(runs, which)
    costs = {}
    for i in which:
        steps = sorted(per_step[i], key=lambda row: row["step"])
        budget, budget_source = budgets[i]
        costs[i] = _fitted(steps, budget, budget_source)
    return costs


def _fitted(
    per_step: Sequence[Mapping[str, Any]], budget: int | None, source: str
) -> FailingRunCost:
    if not per_step or budget is None:
        return FailingRunCost(
            0.0, 0.0, 0.0, "none", "no estimate: no priced model calls by step, or no step budget"
        )
    points = [(float(r["step"] or 0), float(r["mean"]), float(r["n"])) for r in per_step]
    intercept, slope = _weighted_line(points)
    last_seen = int(max(step for step, _, _ in points))

    def cost(step: int) -> float:
        return max(0.0, intercept + slope * step)

    point = sum(cost(step) for step in range(1, budget + 1))
    flat = sum(cost(min(step, last_seen)) for step in range(1, budget + 1))
    low, high = min(point, flat), max(point, flat)
    return FailingRunCost(
        point,
        low,
        high,
        "extrapolated",
        f"extrapolated: {budget} model calls ({source}) at ${intercept:,.5f} + "
        f"${slope:,.5f} per step (a fit over {sum(int(n) for _, _, n in points):,} priced calls "
        f"up to step {last_seen}) = ${point:,.4f}; the low end holds each call past step "
        f"{last_seen} at that step's cost",
    )


def _step_budgets(
    runs: Sequence[QuerySet[Any]], which: Sequence[int]
) -> dict[int, tuple[int | None, str]]:
    """Per window: the runs' most common step budget (the larger on a tie), else the most model
    calls a failing run made."""
    counts = _per_window(
        {
            i: runs[i]
            .filter(step_budget__isnull=False)
            .annotate(window=Value(i, output_field=IntegerField()))
            .values("window", "step_budget")
            .annotate(n=Count("pk"))
            for i in which
        }
    )
    budgets: dict[int, tuple[int | None, str]] = {}
    for i in which:
        if counts[i]:
            common = max(counts[i], key=lambda row: (row["n"], row["step_budget"]))
            budgets[i] = int(common["step_budget"]), "the runs' step budget"
    rest = [i for i in which if i not in budgets]
    most = _one_each(
        {
            i: _tagged(runs[i].filter(_DISCOVERY), i).annotate(steps=Max(F("model_calls")))
            for i in rest
        },
        ("steps",),
    )
    for i in rest:
        steps = most[i]["steps"]
        if steps:
            budgets[i] = (
                int(steps),
                "no step budget reported: the most model calls a failing run made",
            )
        else:
            budgets[i] = None, ""
    return budgets


def _weighted_line(points: list[tuple[float, float, float]]) -> tuple[float, float]:
    """Least squares of cost on step, each step weighted by its number of calls."""
    total = sum(w for _, _, w in points)
    mean_x = sum(x * w for x, _, w in points) / total
    mean_y = sum(y * w for _, y, w in points) / total
    spread = sum(w * (x - mean_x) ** 2 for x, _, w in points)
    if spread == 0:
        return mean_y, 0.0
    slope = sum(w * (x - mean_x) * (y - mean_y) for x, y, w in points) / spread
    return mean_y - slope * mean_x, slope


def _estimate(
    rows: dict[str, Any],
    uncertain: dict[str, Any],
    failing: FailingRunCost,
    healthy: float | None,
) -> tuple[float, float, float] | None:
    if failing.method == "none":
        return None
    hidden_n, hidden_spend = rows["hf_n"], float(rows["hf_spend"] or 0)
    unsure_n, unsure_spend = uncertain["n"], float(uncertain["spend"])
    sure_n, sure_spend = hidden_n - unsure_n, hidden_spend - unsure_spend
    relieved_n, relieved_spend = rows["r_n"], float(rows["r_spend"] or 0)
    # A run hidden after the last failure seen counts at a failing run's spend with the odds
    # that the vendor was still down, else at a healthy run's; with no healthy run known, at its
    # own (no saving) for the share that was up.
    down = uncertain["down"]
    mean_unsure = unsure_spend / unsure_n if unsure_n else 0.0
    up_usd = healthy if healthy is not None else mean_unsure
    unsure_point = down * failing.usd + (unsure_n - down) * up_usd - unsure_spend
    unsure_low = unsure_n * up_usd - unsure_spend
    unsure_high = unsure_n * failing.high - unsure_spend

    def avoided(per_failing_run: float, unsure: float) -> float:
        return (
            sure_n * per_failing_run - sure_spend
            + relieved_n * per_failing_run - relieved_spend
            + unsure
        )  # fmt: skip

    return (
        avoided(failing.usd, unsure_point),
        avoided(failing.low, unsure_low),
        avoided(failing.high, unsure_high),
    )
