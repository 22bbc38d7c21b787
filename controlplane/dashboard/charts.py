"""Plotly figures for outage economics: pure functions from plain data to figure JSON.

No Django, no queries: ``dashboard.economics`` reads the rows and hands these functions lists of
``RunPoint``/``ModeBar``. Each function returns ``fig.to_json()``; the page loads the one local
``plotly.min.js`` (``vendor/plotly.min.js``) and draws the JSON, so nothing needs the internet.

Rules every figure keeps:

- Run duration and model spend are never on one axis: they have different denominators, and a
  fail-fast speed-up must not read as a saving. They sit in separate panels, side by side.
- Every axis has a title with its unit; every figure has a title.
- Colour is never the only signal: what a run met has a colour *and* a marker shape. The palette
  is Okabe-Ito (colourblind-safe), each colour picked to sit next to the panel.css state it means.
- No agent-sent text goes into a figure: plotly renders a subset of HTML in labels, so figures
  carry only numbers, times and our own labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from runs.outage_economics import (
    MET_FAILED_THROUGH,
    MET_HEALTHY,
    MET_REFUSED_FAST,
    MET_TOOL_REMOVED,
)

__all__ = (
    "MET_CATEGORIES",
    "MET_FAILED_THROUGH",
    "MET_HEALTHY",
    "MET_REFUSED_FAST",
    "MET_TOOL_REMOVED",
    "ModeBar",
    "RunPoint",
    "Span",
    "duration_and_spend_figure",
    "met_scatter_figure",
    "mode_comparison_figure",
)

MET_CATEGORIES = (MET_HEALTHY, MET_FAILED_THROUGH, MET_REFUSED_FAST, MET_TOOL_REMOVED)

# Okabe-Ito, matched to panel.css: success is green, a retryable failure red, a refusal amber,
# a removal by a breaker blue (the fleet scope's info colour).
MET_COLOURS: dict[str, str] = {
    MET_HEALTHY: "#009E73",
    MET_FAILED_THROUGH: "#D55E00",
    MET_REFUSED_FAST: "#E69F00",
    MET_TOOL_REMOVED: "#0072B2",
}
MET_SYMBOLS: dict[str, str] = {
    MET_HEALTHY: "circle",
    MET_FAILED_THROUGH: "x",
    MET_REFUSED_FAST: "square",
    MET_TOOL_REMOVED: "diamond",
}
# Breaker modes of a replay: the same hues as what each mode makes runs meet.
MODE_COLOURS: dict[str, str] = {
    "none": "#D55E00",
    "fail-fast": "#E69F00",
    "run": "#56B4E9",
    "worker": "#0072B2",
    "fleet": "#009E73",
}
OTHER_COLOUR = "#4a5159"
OUTAGE_FILL = "#D55E00"
BASELINE_FILL = "#4a5159"
TEXT = "#1a1d21"
MUTED = "#5b626b"
GRID = "#eceef1"
BASELINE_LINE = {"dash": "dash", "color": MUTED, "width": 1.5}
FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif'

DURATION_AXIS = "Run duration (seconds)"
SPEND_AXIS = "Model spend ($ per run)"

X = datetime | float


@dataclass(frozen=True)
class RunPoint:
    """One finished run: when it started, how long it took, what it cost, what it met."""

    x: X  # its start: a UTC datetime, or minutes since a replay began (simulated)
    duration_s: float
    spend_usd: float
    met: str
    group: str = ""  # a replay's mode, shown on hover in charts that mix modes


@dataclass(frozen=True)
class Span:
    """A stretch of the x axis: the outage window, or the baseline before it."""

    start: X
    end: X
    label: str


@dataclass(frozen=True)
class ModeBar:
    """One breaker mode's figures for the comparison bars (from its replay's summary)."""

    mode: str
    runs: int
    spend_per_run_usd: float
    mean_duration_s: float
    vendor_calls: int
    http_attempts: int


def _x(value: X) -> str | float:
    """Plotly.js ignores time zones and misreads offsets: give it naive UTC text."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="seconds")
    return value


def _base_layout(fig: go.Figure, *, title: str, subtitle: str, height: int) -> None:
    fig.update_layout(
        template=None,  # no 7 KB default template per figure; the few styles are set here
        title={
            "text": title,
            "subtitle": {"text": subtitle, "font": {"size": 13, "color": MUTED}},
            "x": 0.01,
            "xanchor": "left",
            "font": {"size": 16, "color": TEXT},
        },
        font={"family": FONT, "size": 12, "color": TEXT},
        height=height,
        margin={"l": 64, "r": 24, "t": 118, "b": 100},
        paper_bgcolor="#ffffff",
        plot_bgcolor="#ffffff",
        hoverlabel={"font": {"family": FONT}},
        legend={
            "orientation": "h",
            "x": 0,
            "xanchor": "left",
            "y": -0.3,
            "yanchor": "top",
        },
    )
    # The x labels stand off the axis: the lowest y label ("$0") reaches below it and met "0 s".
    fig.update_xaxes(
        gridcolor=GRID, linecolor=MUTED, zeroline=False, automargin=True, ticklabelstandoff=6
    )
    fig.update_yaxes(gridcolor=GRID, linecolor=MUTED, zeroline=False, automargin=True)


def _note(fig: go.Figure, text: str | None) -> None:
    """A note under the plot: how the points were sampled, what was left out.

    On its own row under the legend, left-aligned like it, with the figure grown by the rows it
    takes: beside the legend (as it was) it ran into the legend's end and the right-hand x-axis
    title once the page was 1,280 px wide.
    """
    if text:
        lines = text.count("<br>") + 1
        extra = _LEGEND_ROW_PX + _NOTE_LINE_PX * lines
        fig.add_annotation(
            text=text,
            xref="paper",
            yref="paper",
            x=0,
            y=-0.3,
            xanchor="left",
            yanchor="top",
            yshift=-_LEGEND_ROW_PX,
            align="left",
            showarrow=False,
            font={"size": 11, "color": MUTED},
        )
        # The plot keeps its height: the margin under it grows by what the note takes.
        fig.update_layout(
            height=fig.layout.height + extra, margin={"b": fig.layout.margin.b + extra}
        )


_LEGEND_ROW_PX = 26
# The shaded bands' labels, one line each (static/js/charts.js stacks them the same way).
BAND_LABEL_LINE_PX = 14
_NOTE_LINE_PX = 15


def _hline(value: float, axis: str) -> dict[str, Any]:
    return {
        "type": "line",
        "xref": f"x{axis} domain",
        "yref": f"y{axis}",
        "x0": 0,
        "x1": 1,
        "y0": value,
        "y1": value,
        "line": BASELINE_LINE,
    }


def _by_met(points: Sequence[RunPoint]) -> dict[str, list[RunPoint]]:
    groups: dict[str, list[RunPoint]] = {met: [] for met in MET_CATEGORIES}
    for point in points:
        groups.setdefault(point.met, []).append(point)
    return {met: group for met, group in groups.items() if group}


def _padded(top: float) -> list[float]:
    return [0.0, top * 1.08 if top > 0 else 1.0]


def duration_and_spend_figure(
    *,
    points: Sequence[RunPoint],
    outage: Span,
    baseline: Span | None,
    title: str,
    headline: str,
    x_title: str,
    baseline_duration_s: float | None = None,
    baseline_spend_usd: float | None = None,
    note: str | None = None,
    duration_max_s: float | None = None,
    spend_max_usd: float | None = None,
    x_range: tuple[X, X] | None = None,
    height: int = 420,
) -> str:
    """Two panels side by side over the same time axis: duration of each run (seconds) on the
    left, its model spend ($ per run) on the right. The outage window and the baseline before it
    are shaded; the baseline's mean is a dashed line in each panel. Pass the ``*_max`` values to
    give several figures the same scales."""
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_xaxes=True,
        horizontal_spacing=0.09,
        subplot_titles=("Run duration: seconds per run", "Model spend: $ per run"),
    )
    for met, group in _by_met(points).items():
        style = {
            "mode": "markers",
            "name": met,
            "legendgroup": met,
            "marker": {
                "color": MET_COLOURS.get(met, OTHER_COLOUR),
                "symbol": MET_SYMBOLS.get(met, "circle-open"),
                "size": 7,
                "opacity": 0.8,
            },
        }
        xs = [_x(p.x) for p in group]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[p.duration_s for p in group],
                hovertemplate=f"{met}<br>%{{x}}<br>%{{y:,.1f}} s<extra></extra>",
                **style,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[p.spend_usd for p in group],
                showlegend=False,
                hovertemplate=f"{met}<br>%{{x}}<br>$%{{y:,.4f}} per run<extra></extra>",
                **style,
            ),
            row=1,
            col=2,
        )
    # Shapes and their labels are set in one go: plotly's add_vrect/add_hline re-validate every
    # shape on each call, which made a figure four times slower to build.
    shapes: list[dict[str, Any]] = []
    labels: list[dict[str, Any]] = []
    bands = [(baseline, BASELINE_FILL, 0.08, MUTED), (outage, OUTAGE_FILL, 0.12, OUTAGE_FILL)]
    spans = [(span, fill, opacity, colour) for span, fill, opacity, colour in bands if span]
    # Each label on a line of its own at the top of its panel: a 4-minute baseline is a few
    # pixels wide on a long axis, and side by side its label ran into the outage's.
    for row, (span, fill, opacity, colour) in enumerate(spans):
        for axis in ("", "2"):
            shapes.append(
                {
                    "type": "rect",
                    "xref": f"x{axis}",
                    "yref": f"y{axis} domain",
                    "x0": _x(span.start),
                    "x1": _x(span.end),
                    "y0": 0,
                    "y1": 1,
                    "fillcolor": fill,
                    "opacity": opacity,
                    "line": {"width": 0},
                    "layer": "below",
                }
            )
            labels.append(
                {
                    "text": span.label,
                    "xref": f"x{axis}",
                    "yref": f"y{axis} domain",
                    "x": _x(span.start),
                    "y": 1,
                    "xanchor": "left",
                    "yanchor": "top",
                    "yshift": -BAND_LABEL_LINE_PX * row,
                    "showarrow": False,
                    "font": {"size": 11, "color": colour},
                }
            )
    # The baseline means are dashed lines; their values go in the legend, not next to the line,
    # where the healthy runs that make the mean would sit on top of them.
    means: list[str] = []
    for axis, value, text in (
        ("", baseline_duration_s, f"{baseline_duration_s or 0:,.1f} s"),
        ("2", baseline_spend_usd, f"${baseline_spend_usd or 0:,.4f} per run"),
    ):
        if value is not None:
            shapes.append(_hline(value, axis))
            means.append(text)
    if means:
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="lines",
                line=BASELINE_LINE,
                name=f"baseline mean: {', '.join(means)}",
                hoverinfo="skip",
            ),
            row=1,
            col=1,
        )
    fig.update_layout(shapes=shapes, annotations=[*fig.layout.annotations, *labels])
    _base_layout(fig, title=title, subtitle=headline, height=height)
    fig.update_xaxes(title_text=x_title, showticklabels=True)
    if x_range is not None:
        fig.update_xaxes(range=[_x(x_range[0]), _x(x_range[1])])
    fig.update_yaxes(title_text=DURATION_AXIS, ticksuffix=" s", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=SPEND_AXIS, tickprefix="$", rangemode="tozero", row=1, col=2)
    if duration_max_s is not None:
        fig.update_yaxes(range=_padded(duration_max_s), row=1, col=1)
    if spend_max_usd is not None:
        fig.update_yaxes(range=_padded(spend_max_usd), row=1, col=2)
    _note(fig, note)
    return str(fig.to_json())


def met_scatter_figure(
    *,
    points: Sequence[RunPoint],
    title: str,
    subtitle: str,
    note: str | None = None,
    height: int = 440,
) -> str:
    """One point per run: its duration (seconds) across, its model spend ($) up, coloured and
    shaped by what it met. Slow-and-expensive, fast-but-expensive and fast-and-cheap runs land
    in different corners, which is the whole argument in one picture."""
    fig = go.Figure()
    for met, group in _by_met(points).items():
        mixed = any(p.group for p in group)
        fig.add_trace(
            go.Scatter(
                x=[p.duration_s for p in group],
                y=[p.spend_usd for p in group],
                customdata=[p.group for p in group] if mixed else None,
                mode="markers",
                name=f"{met} ({len(group):,} runs)",
                marker={
                    "color": MET_COLOURS.get(met, OTHER_COLOUR),
                    "symbol": MET_SYMBOLS.get(met, "circle-open"),
                    "size": 8,
                    "opacity": 0.75,
                },
                hovertemplate=(
                    f"{met}{'<br>mode %{customdata}' if mixed else ''}"
                    "<br>%{x:,.1f} s<br>$%{y:,.4f} per run<extra></extra>"
                ),
            )
        )
    _base_layout(fig, title=title, subtitle=subtitle, height=height)
    fig.update_layout(legend_title_text="What the run met:")
    fig.update_xaxes(title_text=DURATION_AXIS, ticksuffix=" s", rangemode="tozero")
    fig.update_yaxes(title_text=SPEND_AXIS, tickprefix="$", rangemode="tozero")
    _note(fig, note)
    return str(fig.to_json())


def mode_comparison_figure(
    *, bars: Sequence[ModeBar], title: str, subtitle: str, height: int = 400
) -> str:
    """Three panels side by side, one bar per breaker mode in each: model spend per run ($),
    mean run duration (simulated seconds) and calls that reached the vendor. Each panel has its
    own axis: the point is that the first and the second do not move together."""
    fig = make_subplots(
        rows=1,
        cols=3,
        horizontal_spacing=0.08,
        subplot_titles=(
            "Model spend: $ per run",
            "Mean run duration: seconds (simulated)",
            "Vendor calls during the outage",
        ),
    )
    modes = [bar.mode for bar in bars]
    colours = [MODE_COLOURS.get(mode, OTHER_COLOUR) for mode in modes]
    panels: list[tuple[list[float], list[str], str]] = [
        (
            [bar.spend_per_run_usd for bar in bars],
            [f"${bar.spend_per_run_usd:,.2f}" for bar in bars],
            "%{x}: $%{y:,.4f} per run over %{customdata:,} runs<extra></extra>",
        ),
        (
            [bar.mean_duration_s for bar in bars],
            [f"{bar.mean_duration_s:,.0f} s" for bar in bars],
            "%{x}: %{y:,.1f} s mean over %{customdata:,} runs<extra></extra>",
        ),
        (
            [float(bar.vendor_calls) for bar in bars],
            [f"{bar.vendor_calls:,}" for bar in bars],
            "%{x}: %{y:,} calls (%{customdata:,} HTTP attempts in the whole replay)<extra></extra>",
        ),
    ]
    for col, (values, labels, hover) in enumerate(panels, start=1):
        custom = [bar.http_attempts for bar in bars] if col == 3 else [bar.runs for bar in bars]
        fig.add_trace(
            go.Bar(
                x=modes,
                y=values,
                text=labels,
                textposition="outside",
                cliponaxis=False,
                marker={"color": colours},
                customdata=custom,
                hovertemplate=hover,
                showlegend=False,
            ),
            row=1,
            col=col,
        )
        top = max(values, default=0.0)
        fig.update_yaxes(range=_padded(top * 1.1 if top > 0 else 0.0), row=1, col=col)
    _base_layout(fig, title=title, subtitle=subtitle, height=height)
    fig.update_layout(margin={"t": 118, "b": 60})
    fig.update_xaxes(title_text="Breaker mode", type="category")
    fig.update_yaxes(title_text="$ per run", tickprefix="$", row=1, col=1)
    fig.update_yaxes(title_text="seconds per run (simulated)", ticksuffix=" s", row=1, col=2)
    fig.update_yaxes(title_text="calls (web_search)", row=1, col=3)
    return str(fig.to_json())
