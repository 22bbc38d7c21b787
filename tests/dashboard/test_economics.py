"""Outage economics: what runs met, the headline's maths, replay batches, bounded queries."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from pytest_django import DjangoAssertNumQueries

from breakers.replay.outage import group_replays, mode_label, recent_replay_batches
from controlplane.dashboard.charts import (
    MET_FAILED_THROUGH,
    MET_HEALTHY,
    MET_REFUSED_FAST,
    MET_TOOL_REMOVED,
)
from controlplane.dashboard.economics import (
    incident_charts,
    mode_bar,
    outage_comparison,
    sample_runs,
)
from runs.models import OutageReplay, Run
from runs.outage_economics import (
    TIMES,
    PeriodStats,
    classified_runs,
    compare,
)
from tests.dashboard.factories import (
    T0,
    make_run,
    make_tool_call,
    make_transition,
    make_worker,
)
from tests.dashboard.outage_story import make_incident_story, make_replay_batch

pytestmark = pytest.mark.django_db


def stats(runs: int, duration_s: float, spend_usd: float) -> PeriodStats:
    return PeriodStats(runs=runs, mean_duration_s=duration_s, mean_spend_usd=spend_usd)


# -- what a run met ---------------------------------------------------------------------------


def test_each_run_is_classified_by_what_it_met_with_the_tool() -> None:
    worker = make_worker("w-1")
    healthy = make_run("r-healthy", worker=worker)
    make_tool_call(healthy, step=1, ts=T0)
    failed = make_run("r-failed", worker=worker)
    make_tool_call(failed, step=1, ts=T0, outcome="retryable", attempts=5)
    refused = make_run("r-refused", worker=worker)
    make_tool_call(refused, step=1, ts=T0, outcome="retryable", attempts=5)
    make_tool_call(refused, step=2, ts=T0, outcome="blocked", attempts=0)
    # A fail-fast breaker reports the run's removal too; the refusal is what the run met.
    make_transition(worker=worker, run=refused, ts=T0, scope="worker")
    removed = make_run("r-removed", worker=worker)
    make_tool_call(removed, step=1, ts=T0, outcome="retryable", attempts=5)
    make_transition(worker=worker, run=removed, ts=T0)
    other_tool = make_run("r-other", worker=worker)
    make_tool_call(other_tool, step=1, ts=T0, tool="read_page", outcome="blocked")
    make_transition(worker=worker, run=other_tool, ts=T0, tool="read_page")
    closed_again = make_run("r-closed", worker=worker)
    make_transition(worker=worker, run=closed_again, ts=T0, state="closed")

    met = dict(classified_runs(Run.objects.all(), tool="web_search").values_list("run_id", "met"))

    assert met == {
        "r-healthy": MET_HEALTHY,
        "r-failed": MET_FAILED_THROUGH,
        "r-refused": MET_REFUSED_FAST,
        "r-removed": MET_TOOL_REMOVED,
        "r-other": MET_HEALTHY,
        "r-closed": MET_HEALTHY,
    }


# -- the headline -----------------------------------------------------------------------------


def test_headline_says_how_much_faster_and_how_spend_changed() -> None:
    headline = compare(
        during=stats(300, 40.0, 1.19), reference=stats(340, 408.0, 1.20), against="x", missing=""
    )
    assert headline.text == f"runs got 10{TIMES} faster; model spend per run changed by -0.8%"
    assert headline.speedup == pytest.approx(10.2)
    assert headline.spend_change_pct == pytest.approx(-0.8333, abs=1e-3)
    assert headline.compared


def test_headline_says_slower_when_runs_got_slower() -> None:
    headline = compare(
        during=stats(340, 408.0, 1.20), reference=stats(40, 12.4, 0.169), against="x", missing=""
    )
    assert headline.text == f"runs got 33{TIMES} slower; model spend per run changed by +610%"
    small = compare(
        during=stats(5, 14.0, 0.16), reference=stats(5, 10.0, 0.2), against="x", missing=""
    )
    assert small.text == f"runs got 1.4{TIMES} slower; model spend per run changed by -20%"


def test_headline_rounds_sensibly() -> None:
    same = compare(
        during=stats(3, 10.2, 1.0), reference=stats(3, 10.0, 1.0), against="x", missing=""
    )
    assert (
        same.text == f"run duration did not change (1.0{TIMES}); model spend per run changed by 0%"
    )
    cheaper = compare(
        during=stats(3, 5.6, 0.08), reference=stats(3, 408.0, 1.20), against="x", missing=""
    )
    assert cheaper.text == f"runs got 73{TIMES} faster; model spend per run changed by -93%"
    tiny = compare(
        during=stats(3, 9.0, 1.0004), reference=stats(3, 10.0, 1.0), against="x", missing=""
    )
    assert tiny.text == f"runs got 1.1{TIMES} faster; model spend per run changed by 0%"


def test_headline_without_a_reference_says_so() -> None:
    nothing = compare(
        during=stats(3, 10.0, 1.0), reference=None, against="x", missing="no mode none"
    )
    assert nothing.text == "No reference to compare against: no mode none."
    assert not nothing.compared and nothing.speedup is None
    empty = compare(
        during=stats(3, 10.0, 1.0), reference=PeriodStats(), against="x", missing="no runs"
    )
    assert empty.text == "No reference to compare against: no runs."
    no_window = compare(during=PeriodStats(), reference=stats(3, 1, 1), against="x", missing="")
    assert no_window.text == "No finished runs in the outage window to compare."


def test_headline_from_free_runs() -> None:
    headline = compare(
        during=stats(3, 10.0, 0.5), reference=stats(3, 10.0, 0), against="x", missing=""
    )
    assert headline.text == (
        f"run duration did not change (1.0{TIMES}); model spend per run went from $0 to $0.5000"
    )


# -- incidents --------------------------------------------------------------------------------


def test_incident_is_compared_with_the_same_length_before_it(
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    incident = make_incident_story()
    with django_assert_max_num_queries(2):
        section = incident_charts(incident=incident)
    assert section.baseline.runs == 30 and section.during.runs == 40
    assert incident.closed_at is not None
    assert section.baseline_start == incident.opened_at - (incident.closed_at - incident.opened_at)
    # Healthy runs took ~12 s and cost ~$0.17; three rediscovered the outage, the rest had the
    # tool removed at once: faster and cheaper than the baseline.
    before = list(Run.objects.filter(started_at__lt=incident.opened_at))
    during = list(Run.objects.filter(started_at__gte=incident.opened_at))
    duration_before = sum(r.duration_ms or 0 for r in before) / len(before) / 1000
    duration_during = sum(r.duration_ms or 0 for r in during) / len(during) / 1000
    spend_before = float(sum(r.model_spend_usd for r in before)) / len(before)
    spend_during = float(sum(r.model_spend_usd for r in during)) / len(during)
    assert section.baseline.mean_duration_s == pytest.approx(duration_before)
    assert section.headline.speedup == pytest.approx(duration_before / duration_during)
    assert section.headline.spend_change_pct == pytest.approx(
        (spend_during - spend_before) / spend_before * 100
    )
    # Three runs rediscovered the outage (slow), the rest had the tool removed at once: slower
    # than the healthy baseline on average, but cheaper (they answer with what they have).
    assert (
        section.headline.text == f"runs got 1.4{TIMES} slower; model spend per run changed by -39%"
    )
    assert section.shown == 70 and section.total == 70


def test_incident_without_runs_before_it_says_there_is_no_reference() -> None:
    incident = make_incident_story()
    Run.objects.filter(started_at__lt=incident.opened_at).delete()
    section = incident_charts(incident=incident)
    assert section.headline.text == (
        "No reference to compare against: no finished run reached for the tool in the "
        "22 minutes before the incident."
    )


def test_chart_points_are_capped_and_sampled_evenly_and_deterministically(
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    worker = make_worker("w-1")
    for i in range(35):
        run = make_run(f"r-{i:02}", worker=worker, started_at=T0 + timedelta(seconds=i))
        make_tool_call(run, step=1, ts=run.started_at)
    make_run("r-running", worker=worker, status="running", started_at=T0)
    runs = Run.objects.all()
    with django_assert_max_num_queries(1):
        sample = sample_runs(runs, tool="web_search", total=35, cap=10)
    started = [row[0] for row in sample.rows]
    assert len(sample.rows) == 9 and sample.stride == 4  # 35 runs, every 4th: 1, 5, …, 33
    assert started == [T0 + timedelta(seconds=i) for i in range(0, 35, 4)]
    assert sample_runs(runs, tool="web_search", total=35, cap=10).rows == sample.rows
    assert sample.note(unfinished=1) == (
        "Showing 9 of 35 finished runs: every 4th run by start time. 1 unfinished run not shown."
    )
    everything = sample_runs(runs, tool="web_search", total=35)
    assert everything.stride == 1 and len(everything.rows) == 35 and everything.note() is None


# -- replays ----------------------------------------------------------------------------------


def test_replays_are_grouped_by_the_invocation_that_made_them() -> None:
    first = make_replay_batch(started_at=T0, label="one", window_runs=4, baseline_runs=2)
    second = make_replay_batch(
        started_at=T0 + timedelta(hours=3), label="two", window_runs=4, modes=("none", "fleet")
    )
    # Run again straight after: a repeated mode starts a new batch even without a gap.
    third = make_replay_batch(
        started_at=(second[-1].finished_at or T0) + timedelta(seconds=1), label="three",
        window_runs=4, modes=("none",),
    )  # fmt: skip
    batches = recent_replay_batches()
    assert [b.modes for b in batches] == [
        ["none"],
        ["none", "fleet"],
        ["none", "fail-fast", "run", "worker", "fleet"],
    ]
    assert [b.key for b in batches] == [third[0].pk, second[0].pk, first[0].pk]


def test_a_batch_label_in_the_scenario_decides_the_grouping() -> None:
    replays = make_replay_batch(started_at=T0, label="x", window_runs=2, modes=("none", "fleet"))
    replays[1].scenario = {"batch": "other"}
    replays[0].scenario = {"batch": "mine"}
    assert [b.modes for b in group_replays(replays)] == [["fleet"], ["none"]]


def test_each_mode_is_compared_with_mode_none_of_its_batch(
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    make_replay_batch(started_at=T0, speed=60.0)
    [batch] = recent_replay_batches()
    with django_assert_max_num_queries(2):
        comparison = outage_comparison(batch=batch)
    by_mode = {m.replay.mode: m for m in comparison.modes}
    assert list(by_mode) == ["none", "fail-fast", "run", "worker", "fleet"]
    none, fail_fast, fleet = by_mode["none"], by_mode["fail-fast"], by_mode["fleet"]
    # Durations come back in simulated seconds (stored real durations are 60 times shorter).
    assert none.stats["outage"].mean_duration_s == pytest.approx(408, rel=0.1)
    assert none.stats["outage"].runs == 60 and none.stats["baseline"].runs == 10
    assert none.headline.against == "its own runs before the outage"
    assert "slower" in none.headline.text
    assert fail_fast.headline.against == "mode none (no breaker)"
    assert fail_fast.headline.speedup is not None and fail_fast.headline.speedup > 5
    # Failing fast saved time, not money.
    assert fail_fast.headline.spend_change_pct is not None
    assert abs(fail_fast.headline.spend_change_pct) < 5
    assert fleet.headline.speedup is not None and fleet.headline.speedup > 20
    assert fleet.headline.spend_change_pct is not None and fleet.headline.spend_change_pct < -80
    assert comparison.total == 5 * 80 and comparison.shown == 400
    assert comparison.bars is not None


def test_a_batch_without_mode_none_has_no_reference() -> None:
    make_replay_batch(started_at=T0, modes=("fail-fast", "fleet"), window_runs=6)
    [batch] = recent_replay_batches()
    comparison = outage_comparison(batch=batch)
    for mode in comparison.modes:
        assert mode.headline.text == (
            "No reference to compare against: this batch has no finished replay in mode none."
        )


def test_summary_becomes_bars_and_a_broken_summary_none() -> None:
    [replay] = make_replay_batch(started_at=T0, modes=("none",), window_runs=10)
    bar = mode_bar(replay)
    assert bar is not None and bar.runs == 10
    assert bar.spend_per_run_usd == pytest.approx(1.20, rel=0.1)
    assert bar.vendor_calls == 110
    empty = {"runs": 0, "model_spend_usd": 1, "mean_run_duration_s": 1, "web_search_calls": 1}
    for summary in ({}, empty, {"runs": "many"}, ["not", "a", "dict"]):
        assert mode_bar(OutageReplay(mode="none", summary=summary)) is None


def test_replays_with_more_runs_than_the_cap_are_sampled() -> None:
    make_replay_batch(started_at=T0, modes=("none", "fleet"), window_runs=40, baseline_runs=5)
    [batch] = recent_replay_batches()
    comparison = outage_comparison(batch=batch, cap=30)
    assert comparison.total == 2 * 55
    assert comparison.shown <= 30
    assert comparison.note is not None and "every 4th run by start time" in comparison.note
    for mode in comparison.modes:
        note = json.loads(mode.figure)["layout"]["annotations"][-1]["text"]
        assert note.endswith(
            f"<br>Showing {mode.shown} of 55 finished runs: every 4th run by start time."
        )
        assert note.startswith("No run starts after minute 14 of the 22-minute outage")


def test_mode_names_in_figures_are_plain_words() -> None:
    assert mode_label("fail-fast") == "fail-fast"
    assert mode_label("<b onmouseover=x>") == "?b?onmouseover?x?"
