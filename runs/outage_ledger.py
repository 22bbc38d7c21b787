"""The outage ledger of one tool's incident: what the runs that discovered the failure spent and
took, what runs spent while the tool was hidden from them, and an estimate of the spend that
hiding it avoided, with its range and the method written beside it.

The estimate compares each run with what a run that meets the failing tool and keeps it would
have spent ("a failing run"): measured from such runs when the incident has enough of them,
otherwise extrapolated from the cost of each model call by its step to the runs' step budget
(docs/adr/0204-outage-ledger-estimator.md). Runs hidden after the last failure anyone saw may
have met a vendor that was already back: they count at a healthy run's spend in the point
estimate and the low end, at a failing run's in the high end. A handful of aggregate queries,
however many runs the incident touched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import (
    Avg,
    Count,
    Exists,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    StdDev,
    Sum,
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

__all__ = ("MIN_MEASURED_RUNS", "FailingRunCost", "OutageLedger", "outage_ledger")

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
    runs = _classified(runs_affected(tool=tool, start=start, end=end), tool, start, end)
    rows = _category_sums(runs)
    last_failure = ToolCall.objects.filter(
        tool=tool, outcome__in=FAILED_OUTCOMES, ts__gte=start, ts__lt=end
    ).aggregate(at=Max("ts"))["at"]
    if failures_seen_until is not None and (
        last_failure is None or failures_seen_until > last_failure
    ):
        last_failure = min(failures_seen_until, end)
    back_by = end
    if last_failure is not None:
        first_success = ToolCall.objects.filter(
            tool=tool, outcome=Outcome.SUCCESS, ts__gt=last_failure, ts__lt=end
        ).aggregate(at=Min("ts"))["at"]
        back_by = first_success or end
    uncertain = _uncertain_sums(runs, last_failure, back_by)
    failing = failing_run_cost(runs=runs, tool=tool, start=baseline_start or start, end=end)
    healthy = _healthy_mean(tool=tool, start=baseline_start, end=start)
    estimate = _estimate(rows, uncertain, failing, healthy)
    return OutageLedger(
        start=start,
        end=end,
        discovery_runs=rows["d_n"],
        discovery_spend_usd=rows["d_spend"] or Decimal(0),
        discovery_duration_s=(rows["d_ms"] or 0) / 1000,
        hidden_runs=rows["h_n"],
        hidden_spend_usd=rows["h_spend"] or Decimal(0),
        unfinished_runs=rows["unfinished"],
        unpriced_calls=rows["unpriced"] or 0,
        failures_seen_until=last_failure,
        uncertain_runs=uncertain["n"],
        failing_run=failing,
        healthy_run_usd=healthy,
        avoided_usd=estimate[0] if estimate else None,
        avoided_low_usd=estimate[1] if estimate else None,
        avoided_high_usd=estimate[2] if estimate else None,
    )


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


def _category_sums(runs: QuerySet[Any]) -> dict[str, Any]:
    relieved = _DISCOVERY & Q(lost=True) & _FINISHED
    kept = _DISCOVERY & Q(lost=False) & _FINISHED
    return runs.aggregate(
        d_n=Count("pk", filter=_DISCOVERY),
        d_spend=Sum("model_spend_usd", filter=_DISCOVERY),
        d_ms=Sum("duration_ms", filter=_DISCOVERY & _FINISHED),
        h_n=Count("pk", filter=_HIDDEN),
        h_spend=Sum("model_spend_usd", filter=_HIDDEN),
        # What the estimate adds up: finished runs only.
        r_n=Count("pk", filter=relieved),
        r_spend=Sum("model_spend_usd", filter=relieved),
        k_n=Count("pk", filter=kept),
        hf_n=Count("pk", filter=_HIDDEN & _FINISHED),
        hf_spend=Sum("model_spend_usd", filter=_HIDDEN & _FINISHED),
        unfinished=Count("pk", filter=(_DISCOVERY | _HIDDEN) & ~_FINISHED),
        unpriced=Sum("unpriced_calls", filter=_DISCOVERY | _HIDDEN),
    )


def _uncertain_sums(
    runs: QuerySet[Any], last_failure: datetime | None, back_by: datetime
) -> dict[str, Any]:
    """Finished hidden runs that started after the last failure seen, and how likely the vendor
    was still down at each one's start: the vendor came back at some moment between the last
    failure and ``back_by`` (the first success seen, or the end), each as likely as the other,
    so a run that started a third of the way in met it still down with odds of two in three."""
    if last_failure is None:
        return {"n": 0, "spend": Decimal(0), "down": 0.0}
    after = _HIDDEN & _FINISHED & Q(started_at__gt=last_failure)
    row = runs.aggregate(n=Count("pk", filter=after), spend=Sum("model_spend_usd", filter=after))
    span = (back_by - last_failure).total_seconds()
    down = 0.0
    if span > 0:
        starts = runs.filter(after, started_at__lt=back_by).values_list("started_at", flat=True)
        down = sum((back_by - started).total_seconds() / span for started in starts.iterator())
    return {"n": row["n"], "spend": row["spend"] or Decimal(0), "down": down}


def _healthy_mean(*, tool: str, start: datetime | None, end: datetime) -> float | None:
    """Mean spend of the finished runs that used the tool without a failure before ``end``."""
    if start is None or start >= end:
        return None
    runs = _classified(runs_affected(tool=tool, start=start, end=end), tool, start, end)
    healthy = runs.filter(Q(hit=False, lost=False, duration_ms__isnull=False, finished_at__lt=end))
    mean = healthy.aggregate(mean=Avg("model_spend_usd"))["mean"]
    return None if mean is None else float(mean)


def failing_run_cost(
    *, runs: QuerySet[Any], tool: str, start: datetime, end: datetime
) -> FailingRunCost:
    """What a run that meets the failing tool and keeps it would spend (see the module doc)."""
    kept = runs.filter(_DISCOVERY & Q(lost=False) & _FINISHED)
    row = kept.aggregate(
        n=Count("pk"), mean=Avg("model_spend_usd"), sd=StdDev("model_spend_usd", sample=True)
    )
    if row["n"] >= MIN_MEASURED_RUNS:
        mean, sd, n = float(row["mean"]), float(row["sd"] or 0), row["n"]
        margin = _Z95 * sd / math.sqrt(n)
        return FailingRunCost(
            mean,
            max(0.0, mean - margin),
            mean + margin,
            "measured",
            f"measured: the mean of the {n} runs that met the failure and kept the tool to "
            f"their end, ${mean:,.4f}, with its 95% interval",
        )
    return _extrapolated(tool=tool, start=start, end=end, runs=runs)


def _extrapolated(
    *, tool: str, start: datetime, end: datetime, runs: QuerySet[Any]
) -> FailingRunCost:
    """A failing run uses its whole step budget (the runs' most common one; else the most steps
    any of them took): each step's model call priced by a straight-line fit of cost on step over
    the model calls of the runs that reached for the tool, since context grows step by step. The
    low end assumes the context stops growing past the last step seen."""
    reaching = runs_affected(tool=tool, start=start, end=end).values("pk")
    per_step = list(
        ModelCall.objects.filter(run_id__in=reaching, step__isnull=False, step__lte=MAX_FIT_STEP)
        .exclude(cost_source=CostSource.UNKNOWN)
        .values("step")
        .annotate(n=Count("pk"), mean=Avg("cost_usd"))
        .order_by("step")
    )
    budget, budget_source = _step_budget(runs)
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
        f"extrapolated: {budget} model calls ({budget_source}) at ${intercept:,.5f} + "
        f"${slope:,.5f} per step (a fit over {sum(int(n) for _, _, n in points):,} priced calls "
        f"up to step {last_seen}) = ${point:,.4f}; the low end holds each call past step "
        f"{last_seen} at that step's cost",
    )


def _step_budget(runs: QuerySet[Any]) -> tuple[int | None, str]:
    common = (
        runs.filter(step_budget__isnull=False)
        .values("step_budget")
        .annotate(n=Count("pk"))
        .order_by("-n", "-step_budget")
        .first()
    )
    if common is not None:
        return int(common["step_budget"]), "the runs' step budget"
    most = runs.filter(_DISCOVERY).aggregate(steps=Max(F("model_calls")))["steps"]
    if most:
        return int(most), "no step budget reported: the most model calls a failing run made"
    return None, ""


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
