"""The figures: two panels with their own axes and units, the shaded window, what runs met."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from controlplane.dashboard.charts import (
    MET_CATEGORIES,
    MET_COLOURS,
    MET_FAILED_THROUGH,
    MET_HEALTHY,
    MET_REFUSED_FAST,
    MET_SYMBOLS,
    MET_TOOL_REMOVED,
    MODE_COLOURS,
    ModeBar,
    RunPoint,
    Span,
    duration_and_spend_figure,
    met_scatter_figure,
    mode_comparison_figure,
)
from runs.outage_economics import TIMES
from tests.dashboard.factories import T0

OPENED = T0
CLOSED = T0 + timedelta(minutes=22)
BASELINE = T0 - timedelta(minutes=22)


def story_points() -> list[RunPoint]:
    points = [
        RunPoint(BASELINE + timedelta(minutes=i), 12.0 + i % 3, 0.17, MET_HEALTHY)
        for i in range(0, 22, 2)
    ]
    points += [
        RunPoint(OPENED + timedelta(minutes=i), 408.0, 1.20, MET_FAILED_THROUGH) for i in range(3)
    ]
    points += [
        RunPoint(OPENED + timedelta(minutes=i), 40.0, 1.19, MET_REFUSED_FAST) for i in range(3, 9)
    ]
    points += [
        RunPoint(OPENED + timedelta(minutes=i), 5.6, 0.09, MET_TOOL_REMOVED) for i in range(9, 22)
    ]
    return points


def timeline(**overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "points": story_points(),
        "outage": Span(OPENED, CLOSED, "incident"),
        "baseline": Span(BASELINE, OPENED, "baseline"),
        "title": "Run duration and model spend per run",
        "headline": f"runs got 2.1{TIMES} faster; model spend per run changed by -12%",
        "x_title": "Run start (UTC)",
        "baseline_duration_s": 13.0,
        "baseline_spend_usd": 0.17,
    }
    arguments.update(overrides)
    return dict(json.loads(duration_and_spend_figure(**arguments)))


def annotation_texts(figure: dict[str, Any]) -> list[str]:
    return [a.get("text", "") for a in figure["layout"].get("annotations", [])]


def test_duration_and_spend_are_two_panels_with_their_own_axes_and_units() -> None:
    figure = timeline()
    layout = figure["layout"]
    assert layout["title"]["text"] == "Run duration and model spend per run"
    assert layout["title"]["subtitle"]["text"] == (
        f"runs got 2.1{TIMES} faster; model spend per run changed by -12%"
    )
    # Two y axes, side by side (different x domains), neither overlaying the other.
    left, right = layout["yaxis"], layout["yaxis2"]
    assert "overlaying" not in right and "matches" not in right
    assert layout["xaxis"]["domain"][1] < layout["xaxis2"]["domain"][0]
    assert left["title"]["text"] == "Run duration (seconds)" and left["ticksuffix"] == " s"
    assert right["title"]["text"] == "Model spend ($ per run)" and right["tickprefix"] == "$"
    assert layout["xaxis"]["title"]["text"] == "Run start (UTC)"
    assert layout["xaxis2"]["title"]["text"] == "Run start (UTC)"
    titles = annotation_texts(figure)
    assert "Run duration: seconds per run" in titles and "Model spend: $ per run" in titles
    # Every run is in both panels: durations on the left, spends on the right.
    runs = [t for t in figure["data"] if "legendgroup" in t]
    left_traces = [t for t in runs if t.get("yaxis", "y") == "y"]
    right_traces = [t for t in runs if t.get("yaxis") == "y2"]
    assert sum(len(t["y"]) for t in left_traces) == sum(len(t["y"]) for t in right_traces) == 33
    assert max(max(t["y"]) for t in left_traces) == 408.0
    assert max(max(t["y"]) for t in right_traces) == 1.2


def test_the_outage_window_and_the_baseline_are_shaded_in_both_panels() -> None:
    figure = timeline()
    rects = [s for s in figure["layout"]["shapes"] if s["type"] == "rect"]
    outage = [r for r in rects if r["fillcolor"] == "#D55E00"]
    baseline = [r for r in rects if r["fillcolor"] == "#4a5159"]
    assert {r["xref"] for r in outage} == {r["xref"] for r in baseline} == {"x", "x2"}
    # Naive UTC text: plotly.js would misread a "+00:00" offset.
    assert {(r["x0"], r["x1"]) for r in outage} == {("2026-11-29 09:12:04", "2026-11-29 09:34:04")}
    assert {(r["x0"], r["x1"]) for r in baseline} == {
        ("2026-11-29 08:50:04", "2026-11-29 09:12:04")
    }
    assert outage[0]["opacity"] > baseline[0]["opacity"]
    lines = [s for s in figure["layout"]["shapes"] if s["type"] == "line"]
    assert {(line["yref"], line["y0"]) for line in lines} == {("y", 13.0), ("y2", 0.17)}
    texts = annotation_texts(figure)
    assert "incident" in texts and "baseline" in texts
    # The means' values are in the legend, beside the dashed line's own sample.
    [mean] = [t for t in figure["data"] if t["name"].startswith("baseline mean")]
    assert mean["name"] == "baseline mean: 13.0 s, $0.1700 per run"
    assert mean["line"]["dash"] == "dash"


def test_without_a_baseline_nothing_is_shaded_grey() -> None:
    figure = timeline(baseline=None, baseline_duration_s=None, baseline_spend_usd=None)
    shapes = figure["layout"]["shapes"]
    assert {s["fillcolor"] for s in shapes} == {"#D55E00"}
    assert not [t for t in figure["data"] if t["name"].startswith("baseline mean")]


def test_runs_are_coloured_and_shaped_by_what_they_met() -> None:
    figure = timeline()
    runs = [t for t in figure["data"] if "legendgroup" in t]
    legend = [t["name"] for t in runs if t.get("showlegend", True)]
    assert legend == list(MET_CATEGORIES)
    for trace in runs:
        met = trace["legendgroup"]
        assert trace["marker"]["color"] == MET_COLOURS[met]
        assert trace["marker"]["symbol"] == MET_SYMBOLS[met]
    # Four colours and four shapes: colour is never the only thing telling them apart.
    assert len(set(MET_COLOURS.values())) == len(set(MET_SYMBOLS.values())) == 4


def test_the_scatter_puts_duration_across_and_spend_up_with_counts_in_the_legend() -> None:
    points = [*story_points(), RunPoint(2.0, 3.0, 0.5, MET_HEALTHY, group="fleet")]
    figure = json.loads(
        met_scatter_figure(
            points=points, title="Each run", subtitle="by what it met", note="Showing all"
        )
    )
    layout = figure["layout"]
    assert layout["xaxis"]["title"]["text"] == "Run duration (seconds)"
    assert layout["yaxis"]["title"]["text"] == "Model spend ($ per run)"
    names = [t["name"] for t in figure["data"]]
    assert names == [
        "healthy tool (12 runs)",
        "failed through (3 runs)",
        "refused fast (6 runs)",
        "tool removed (13 runs)",
    ]
    failed = figure["data"][1]
    assert failed["x"] == [408.0] * 3 and failed["y"] == [1.2] * 3
    assert "mode %{customdata}" in figure["data"][0]["hovertemplate"]
    assert "Showing all" in annotation_texts(figure)


def test_mode_comparison_has_three_panels_from_the_summaries() -> None:
    bars = [
        ModeBar("none", 340, 1.20, 408.0, 3700, 18500),
        ModeBar("fail-fast", 340, 1.19, 40.0, 45, 225),
        ModeBar("fleet", 340, 0.10, 6.1, 12, 60),
    ]
    figure = json.loads(mode_comparison_figure(bars=bars, title="Modes", subtitle="window"))
    layout = figure["layout"]
    spend, duration, calls = figure["data"]
    assert spend["y"] == [1.20, 1.19, 0.10] and spend["yaxis"] == "y"
    assert duration["y"] == [408.0, 40.0, 6.1] and duration["yaxis"] == "y2"
    assert calls["y"] == [3700, 45, 12] and calls["yaxis"] == "y3"
    assert spend["x"] == ["none", "fail-fast", "fleet"]
    assert spend["marker"]["color"] == [MODE_COLOURS[m] for m in ("none", "fail-fast", "fleet")]
    assert spend["text"] == ["$1.20", "$1.19", "$0.10"]
    assert layout["yaxis"]["title"]["text"] == "$ per run"
    assert layout["yaxis2"]["title"]["text"] == "seconds per run (simulated)"
    assert layout["yaxis3"]["title"]["text"] == "calls (web_search)"
    assert layout["xaxis"]["domain"][1] < layout["xaxis2"]["domain"][0]
    assert layout["xaxis2"]["domain"][1] < layout["xaxis3"]["domain"][0]
    assert layout["title"]["text"] == "Modes"


def test_shared_scales_and_simulated_minutes() -> None:
    figure = timeline(
        points=[RunPoint(5.0, 30.0, 0.2, MET_HEALTHY)],
        outage=Span(4.0, 26.0, "outage"),
        baseline=Span(0.0, 4.0, "baseline"),
        x_title="Run start: minutes since the replay began (simulated)",
        duration_max_s=400.0,
        spend_max_usd=1.0,
        x_range=(0.0, 32.0),
        note="Showing 1 of 9 finished runs",
    )
    layout = figure["layout"]
    assert layout["yaxis"]["range"] == [0.0, 432.0]
    assert layout["yaxis2"]["range"] == [0.0, 1.08]
    assert layout["xaxis"]["range"] == [0.0, 32.0]
    assert "Showing 1 of 9 finished runs" in annotation_texts(figure)


def test_figures_need_nothing_from_the_internet() -> None:
    text = duration_and_spend_figure(
        points=story_points(),
        outage=Span(OPENED, CLOSED, "incident"),
        baseline=None,
        title="t",
        headline="h",
        x_title="x",
    )
    assert "http" not in text
    assert not json.loads(text)["layout"].get("template")  # no 7 KB default template
