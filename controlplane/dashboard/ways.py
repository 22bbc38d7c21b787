"""The Outages page's "ways of taking a tool away" section: a recorded ``replay_ways`` invocation
(``runs.models.WaysReplay``) read back per provider shape, with the cheapest way, what it saves
against ``remove`` and the goal's verdict per mode, from the stored rows and assumptions only.
Stored figures are read defensively: a row that is not the command's shape is left out and
counted, never a 500."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from breakers.replay.outage import (
    KEEP_SHARE,
    PROVIDERS,
    REPLAY_WAYS,
    WAY_MODES,
    cheapest_ways,
    latest_ways_replays,
    ways_status,
)
from controlplane.dashboard.charts import _base_layout
from runs.models import WaysReplay

__all__ = ("WaysSection", "ways_section")

WAY_COLOURS = {
    "remove": "#D55E00",
    "restrict": "#0072B2",
    "refuse": "#009E73",
    "default": "#CC79A7",
}
_NUMBERS = (
    "spend_usd",
    "spend_uncached_usd",
    "cached_share_pre_outage",
    "cached_share_outage",
    "cached_share_kept",
    "mean_run_duration_s",
)


@dataclass(frozen=True)
class WaysRow:
    mode: str
    way: str | None
    runs: int | None
    spend_usd: float | None
    spend_uncached_usd: float | None
    cached_share_pre_outage: float | None
    cached_share_outage: float | None
    cached_share_kept: float | None
    hidden_tool_calls: int | None
    mean_run_duration_s: float | None
    goal: str  # "met", "missed" or "" (no way: the mode never takes the tool away)
    goal_text: str  # why, in words


@dataclass(frozen=True)
class WayTotal:
    way: str
    spend_usd: float
    meets_goal: bool | None  # in every removal mode; None without remove's figures
    misses: list[str]  # where it misses the goal, in words


@dataclass(frozen=True)
class ProviderWays:
    provider: str
    rows: list[WaysRow]
    totals: list[WayTotal]  # spend over the removal modes, per way
    cheapest: str | None
    saves_usd: float | None  # the cheapest way against remove, over the removal modes
    saves_share: float | None  # ... as a share of remove's spend
    rule: str


@dataclass(frozen=True)
class WaysSection:
    records: list[WaysReplay]  # newest first, to choose from
    selected: WaysReplay | None
    status: str  # the selected record's: "complete", "playing" or "interrupted"
    providers: list[ProviderWays]
    assumptions: list[str]
    planned: int
    played: int
    unreadable: int  # stored rows that are not the command's shape (left out)
    figure: str | None


def ways_section(*, record_key: int | None = None) -> WaysSection:
    """The records to choose from and the chosen one (by default the newest played through;
    while none is, the newest still playing; never an interrupted one). A key that names no
    record among the newest raises ``LookupError``."""
    records = latest_ways_replays()
    statuses = {record.pk: ways_status(record) for record in records}
    if record_key is None:
        selected = next((r for r in records if statuses[r.pk] == "complete"), None)
        selected = selected or next((r for r in records if statuses[r.pk] == "playing"), None)
    else:
        selected = next((r for r in records if r.pk == record_key), None)
        if selected is None:
            raise LookupError(f"no ways replay {record_key} among the newest")
    if selected is None:
        return WaysSection(records, None, "", [], [], 0, 0, 0, None)
    raw_rows = selected.rows if isinstance(selected.rows, list) else []
    rows = [row for row in (_read_row(raw) for raw in raw_rows) if row is not None]
    providers = [
        _provider_ways(provider, rows) for provider in dict.fromkeys(r["provider"] for r in rows)
    ]
    assumptions = selected.assumptions if isinstance(selected.assumptions, list) else []
    planned = selected.planned if isinstance(selected.planned, list) else []
    return WaysSection(
        records=records,
        selected=selected,
        status=statuses[selected.pk],
        providers=providers,
        assumptions=[str(line) for line in assumptions],
        planned=len(planned),
        played=len(raw_rows),
        unreadable=len(raw_rows) - len(rows),
        figure=ways_figure(providers) if providers else None,
    )


def _read_row(raw: object) -> dict[str, Any] | None:
    """A stored row as the command wrote it, or None."""
    if not isinstance(raw, dict):
        return None
    provider, mode, way = raw.get("provider"), raw.get("mode"), raw.get("way")
    if not isinstance(provider, str) or not isinstance(mode, str):
        return None
    if way is not None and not isinstance(way, str):
        return None
    row: dict[str, Any] = {"provider": provider, "mode": mode, "way": way}
    for key in _NUMBERS:
        row[key] = _number(raw.get(key))
    for key in ("runs", "hidden_tool_calls"):
        value = _number(raw.get(key))
        row[key] = None if value is None else int(value)
    row["rule"] = str(raw.get("rule", ""))[:500]
    if row["spend_usd"] is None:
        return None
    return row


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _provider_ways(provider: str, rows: Sequence[Mapping[str, Any]]) -> ProviderWays:
    mine = [r for r in rows if r["provider"] == provider]
    remove = {r["mode"]: r["spend_usd"] for r in mine if r["way"] == "remove"}
    goal = {(r["mode"], r["way"]): _goal(r, remove) for r in mine if r["way"] is not None}
    verdict = cheapest_ways(mine).get(provider, {})
    spend = verdict.get("spend_by_way", {})
    meets = verdict.get("meets_goal")
    totals = [
        WayTotal(
            way=way,
            spend_usd=total,
            meets_goal=None if meets is None else bool(meets.get(way)),
            misses=[
                f"{mode}: {text}"
                for (mode, w), (met, text) in goal.items()
                if w == way and met is False
            ],
        )
        for way, total in spend.items()
    ]
    cheapest = verdict.get("cheapest")
    saves = verdict.get("saves_vs_remove_usd")
    remove_total = spend.get("remove")
    return ProviderWays(
        provider=provider,
        rows=[
            WaysRow(
                mode=r["mode"],
                way=r["way"],
                runs=r["runs"],
                spend_usd=r["spend_usd"],
                spend_uncached_usd=r["spend_uncached_usd"],
                cached_share_pre_outage=r["cached_share_pre_outage"],
                cached_share_outage=r["cached_share_outage"],
                cached_share_kept=r["cached_share_kept"],
                hidden_tool_calls=r["hidden_tool_calls"],
                mean_run_duration_s=r["mean_run_duration_s"],
                goal="" if r["way"] is None else _goal_word(goal[(r["mode"], r["way"])][0]),
                goal_text="" if r["way"] is None else goal[(r["mode"], r["way"])][1],
            )
            for r in mine
        ],
        totals=totals,
        cheapest=cheapest,
        saves_usd=saves,
        saves_share=saves / remove_total if saves is not None and remove_total else None,
        rule=next((r["rule"] for r in mine if r["rule"]), ""),
    )


def _goal(row: Mapping[str, Any], remove: Mapping[str, float]) -> tuple[bool | None, str]:
    """The goal in one mode (``cheapest_ways``'s test): the cached share kept >= 90% and spend no
    higher than remove's in the same mode; (None, why) without remove's figure."""
    if row["mode"] not in remove:
        return None, "remove not played in this mode: no comparison"
    kept, spend, theirs = row["cached_share_kept"], row["spend_usd"], remove[row["mode"]]
    reasons = []
    if kept is None or kept < KEEP_SHARE:
        shown = "no cached share before the outage" if kept is None else f"kept {kept:.0%}"
        reasons.append(f"{shown}, under {KEEP_SHARE:.0%}")
    if spend > theirs + 1e-9:
        reasons.append(f"${spend:,.2f} is more than remove's ${theirs:,.2f}")
    if reasons:
        return False, "; ".join(reasons)
    return True, f"kept {kept:.0%} at ${spend:,.2f} (remove: ${theirs:,.2f})"


def _label(name: str, known: Sequence[str]) -> str:
    """Only the command's own names reach a figure (plotly renders some HTML in labels)."""
    return name if name in known else "other"


def ways_figure(providers: Sequence[ProviderWays]) -> str:
    """Per provider, two panels: spend of the removal modes per way ($) and mean run duration
    per way (seconds, simulated), each on its own axis."""
    shown = [p for p in providers if p.totals]
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.14,
        subplot_titles=(
            "Spend, removal modes: $",
            "Mean duration: s (simulated)",
        ),
    )
    for way in REPLAY_WAYS:
        x = [_label(p.provider, tuple(PROVIDERS)) for p in shown]
        spend = [next((t.spend_usd for t in p.totals if t.way == way), None) for p in shown]
        duration = [_mean_duration(p, way) for p in shown]
        colour = {"color": WAY_COLOURS[way]}
        for col, values, hover in (
            (1, spend, "%{x}, " + way + ": $%{y:,.2f}<extra></extra>"),
            (2, duration, "%{x}, " + way + ": %{y:,.1f} s<extra></extra>"),
        ):
            fig.add_trace(
                go.Bar(
                    x=x,
                    y=values,
                    name=way,
                    legendgroup=way,
                    showlegend=col == 1,
                    marker=colour,
                    hovertemplate=hover,
                ),
                row=1,
                col=col,
            )
    _base_layout(
        fig,
        title="Ways of taking the tool away, with prompt caching",
        subtitle="Per provider shape: spend and duration, each on its own axis",
        height=420,
    )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="Provider shape", type="category")
    fig.update_yaxes(title_text="$", tickprefix="$", row=1, col=1)
    fig.update_yaxes(title_text="seconds per run", ticksuffix=" s", row=1, col=2)
    return str(fig.to_json())


def _mean_duration(provider: ProviderWays, way: str) -> float | None:
    values = [
        r.mean_run_duration_s
        for r in provider.rows
        if r.way == way and r.mode in WAY_MODES and r.mean_run_duration_s is not None
    ]
    return sum(values) / len(values) if values else None


def _goal_word(verdict: bool | None) -> str:
    """A way's verdict on the goal in one mode: "not judged" where remove was not played in that
    mode (nothing to hold it against)."""
    return {True: "met", False: "missed", None: "not judged"}[verdict]
