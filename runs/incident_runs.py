"""Read-side queries over what runs reported, shared by alerts and the dashboard.

"Runs affected by a tool during a window" is asked by the Slack alerts, the incident page and the
incident charts; it lives here once so the three cannot drift apart. Every window is half-open,
[start, end): a row stamped exactly at ``end`` belongs to the next window, so an incident and the
equally long window before it never count the same row twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Count, Q, QuerySet, Sum

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

__all__ = ["IncidentMeasures", "incident_measures", "runs_affected"]


def runs_affected(*, tool: str, start: datetime, end: datetime) -> QuerySet[Run]:
    """Runs that called ``tool`` or had it removed (a per-run open transition, any scope)
    in [start, end)."""
    called = ToolCall.objects.filter(tool=tool, ts__gte=start, ts__lt=end).values("run_id")
    removed = ReportedTransition.objects.filter(
        tool=tool, state=BreakerState.OPEN, run__isnull=False, ts__gte=start, ts__lt=end
    ).values("run_id")
    return Run.objects.filter(Q(pk__in=called) | Q(pk__in=removed))


# A model call that said how much of its input was cached (either count, even 0).
_REPORTED_CACHE = Q(cache_read_tokens__isnull=False) | Q(cache_write_tokens__isnull=False)


@dataclass(frozen=True)
class IncidentMeasures:
    """What happened around one tool in one window of time, [start, end)."""

    start: datetime
    end: datetime
    runs: int
    degraded_runs: int
    model_calls: int
    model_spend_usd: Decimal
    tool_calls: int
    vendor_calls: int  # calls that reached the vendor (not refused by a breaker)
    vendor_attempts: int
    failures: int  # counted: retryable or degraded
    blocked: int
    # Prompt caching of those model calls: tokens read from the cache, and the input tokens of
    # the calls that reported cache counts (the share's denominator).
    cache_read_tokens: int = 0
    cache_input_tokens: int = 0
    unpriced_calls: int = 0  # model calls whose price is unknown (counted as $0 in the spend)

    @property
    def cached_share(self) -> float | None:
        if not self.cache_input_tokens:
            return None
        return self.cache_read_tokens / self.cache_input_tokens


def incident_measures(*, tool: str, start: datetime, end: datetime) -> IncidentMeasures:
    """Three aggregate queries over [start, end): the affected runs, their model calls (in the
    window) and the tool's calls."""
    affected = runs_affected(tool=tool, start=start, end=end)
    runs = affected.aggregate(n=Count("id"), degraded=Count("id", filter=Q(degraded=True)))
    model = ModelCall.objects.filter(
        ts__gte=start, ts__lt=end, run_id__in=affected.values("pk")
    ).aggregate(
        n=Count("id"),
        spend=Sum("cost_usd"),
        cache_read=Sum("cache_read_tokens"),
        cache_input=Sum("input_tokens", filter=_REPORTED_CACHE),
        unpriced=Count("id", filter=Q(cost_source=CostSource.UNKNOWN)),
    )
    reached = ~Q(outcome=Outcome.BLOCKED)
    calls = ToolCall.objects.filter(tool=tool, ts__gte=start, ts__lt=end).aggregate(
        n=Count("id"),
        vendor=Count("id", filter=reached),
        attempts=Sum("attempts", filter=reached),
        failures=Count("id", filter=Q(outcome__in=FAILED_OUTCOMES)),
        blocked=Count("id", filter=Q(outcome=Outcome.BLOCKED)),
    )
    return IncidentMeasures(
        start=start,
        end=end,
        runs=runs["n"],
        degraded_runs=runs["degraded"],
        model_calls=model["n"],
        model_spend_usd=model["spend"] or Decimal(0),
        tool_calls=calls["n"],
        vendor_calls=calls["vendor"],
        vendor_attempts=calls["attempts"] or 0,
        failures=calls["failures"],
        blocked=calls["blocked"],
        cache_read_tokens=model["cache_read"] or 0,
        cache_input_tokens=model["cache_input"] or 0,
        unpriced_calls=model["unpriced"],
    )
