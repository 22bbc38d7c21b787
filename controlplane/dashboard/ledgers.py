"""The Outages page's outage ledgers: every incident of the last days, replayed or real, summed per
tool and day, with a figure that keeps time out of the fleet and spend on separate axes.

Each incident's ledger is ``breakers.alerts.ledger.incident_ledger``'s, all of them computed
together (``incident_ledgers``: a dozen queries, however many incidents): the newest
``MAX_INCIDENTS`` incidents of the period are read, and the page says when there were more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import plotly.graph_objects as go
from django.utils import timezone
from plotly.subplots import make_subplots

from breakers.alerts.ledger import incident_ledgers
from breakers.models import Incident
from controlplane.dashboard.charts import _base_layout

__all__ = ("LEDGER_DAYS", "MAX_INCIDENTS", "LedgerRow", "LedgerSummary", "ledger_summary")

LEDGER_DAYS = 30
MAX_INCIDENTS = 30  # each one's queries are a part of the same UNION ALL
OUT_COLOUR = "#D55E00"  # time out of the fleet: the outage's colour in the other figures
DISCOVERY_COLOUR = "#E69F00"
AVOIDED_COLOUR = "#009E73"


@dataclass
class LedgerRow:
    """One tool on one day (UTC): its incidents' ledgers added up."""

    tool: str
    tool_id: int
    day: date
    incidents: int = 0
    out_s: float = 0.0  # time out of the fleet (opened to closed, or to now)
    discovery_runs: int = 0
    discovery_spend_usd: Decimal = Decimal(0)
    discovery_duration_s: float = 0.0
    hidden_runs: int = 0
    hidden_spend_usd: Decimal = Decimal(0)
    avoided_usd: float = 0.0
    avoided_low_usd: float = 0.0
    avoided_high_usd: float = 0.0
    not_estimated: int = 0  # incidents without an estimate (nothing to estimate from)
    ongoing: int = 0

    @property
    def spend_per_hidden_run_usd(self) -> Decimal | None:
        return self.hidden_spend_usd / self.hidden_runs if self.hidden_runs else None

    @property
    def out_ms(self) -> int:
        return round(self.out_s * 1000)


@dataclass
class LedgerSummary:
    days: int
    rows: list[LedgerRow] = field(default_factory=list)  # newest day first, then tool
    incidents: int = 0
    more: bool = False  # more incidents in the period than were read
    figure: str = ""


def ledger_summary(*, days: int = LEDGER_DAYS, now: datetime | None = None) -> LedgerSummary:
    now = now or timezone.now()
    since = now - timedelta(days=days)
    incidents = list(
        Incident.objects.filter(opened_at__gte=since)
        .select_related("tool", "opened_by")
        .order_by("-opened_at", "-id")[: MAX_INCIDENTS + 1]
    )
    summary = LedgerSummary(days=days, more=len(incidents) > MAX_INCIDENTS)
    incidents = incidents[:MAX_INCIDENTS]
    rows: dict[tuple[date, str], LedgerRow] = {}
    ends = [incident.closed_at or now for incident in incidents]
    for incident, end, ledger in zip(
        incidents, ends, incident_ledgers(incidents, ends=ends), strict=True
    ):
        day = incident.opened_at.astimezone(UTC).date()
        row = rows.setdefault(
            (day, incident.tool.name), LedgerRow(incident.tool.name, incident.tool_id, day)
        )
        row.incidents += 1
        row.ongoing += incident.closed_at is None
        row.out_s += (end - incident.opened_at).total_seconds()
        row.discovery_runs += ledger.discovery_runs
        row.discovery_spend_usd += ledger.discovery_spend_usd
        row.discovery_duration_s += ledger.discovery_duration_s
        row.hidden_runs += ledger.hidden_runs
        row.hidden_spend_usd += ledger.hidden_spend_usd
        if ledger.avoided_usd is None:
            row.not_estimated += 1
        else:
            row.avoided_usd += ledger.avoided_usd
            row.avoided_low_usd += ledger.avoided_low_usd or 0.0
            row.avoided_high_usd += ledger.avoided_high_usd or 0.0
    summary.incidents = len(incidents)
    summary.rows = sorted(rows.values(), key=lambda r: (-r.day.toordinal(), r.tool))
    if summary.rows:
        summary.figure = ledger_figure(summary.rows, days=days)
    return summary


def ledger_figure(rows: Sequence[LedgerRow], *, days: int) -> str:
    """Two panels per day, every tool together (tool names are agent-sent text and stay out of
    figures): hours out of the fleet on one axis, model spend on another."""
    per_day: dict[date, list[LedgerRow]] = {}
    for row in rows:
        per_day.setdefault(row.day, []).append(row)
    day_list = sorted(per_day)
    x = [d.isoformat() for d in day_list]

    def total(attr: str) -> list[float]:
        return [float(sum(getattr(r, attr) for r in per_day[d])) for d in day_list]

    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=("Time out of the fleet: minutes", "Model spend: $"),
    )
    out_minutes = [s / 60 for s in total("out_s")]
    fig.add_trace(
        go.Bar(
            x=x,
            y=out_minutes,
            name="Out of the fleet",
            marker={"color": OUT_COLOUR},
            hovertemplate="%{x}: %{y:,.1f} min out of the fleet<extra></extra>",
        ),
        row=1,
        col=1,
    )
    avoided = total("avoided_usd")
    low, high = total("avoided_low_usd"), total("avoided_high_usd")
    fig.add_trace(
        go.Bar(
            x=x,
            y=total("discovery_spend_usd"),
            name="Spent by runs that hit the failing tool",
            marker={"color": DISCOVERY_COLOUR, "pattern": {"shape": "/"}},
            hovertemplate="%{x}: $%{y:,.2f} spent discovering the failure<extra></extra>",
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Bar(
            x=x,
            y=avoided,
            name="Spend avoided (estimate, with its range)",
            marker={"color": AVOIDED_COLOUR},
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [max(0.0, h - a) for h, a in zip(high, avoided, strict=True)],
                "arrayminus": [max(0.0, a - lo) for a, lo in zip(avoided, low, strict=True)],
                "color": "#1a1d21",
            },
            hovertemplate="%{x}: $%{y:,.2f} spend avoided (estimate)<extra></extra>",
        ),
        row=1,
        col=2,
    )
    _base_layout(
        fig,
        title=f"Outage ledgers, last {days} days",
        subtitle="Every incident, replayed or real, per day (UTC); each measure on its own axis",
        height=420,
    )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="Day the incident opened (UTC)", type="category")
    fig.update_yaxes(title_text="minutes", ticksuffix=" min", row=1, col=1)
    fig.update_yaxes(title_text="$", tickprefix="$", row=1, col=2)
    return str(fig.to_json())
