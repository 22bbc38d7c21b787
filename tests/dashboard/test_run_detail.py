"""The run page: every step in order, what a breaker removed and by which scope, bounded."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from html import escape

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from pytest_django import DjangoAssertNumQueries

from breaker_panel import ToolBreaker, ToolFailure
from controlplane.dashboard import queries
from runs.models import OutageReplay, Run
from tests.dashboard.factories import (
    HOSTILE_NAME,
    HOSTILE_SCRIPT,
    T0,
    make_model_call,
    make_outage_run,
    make_run,
    make_tool_call,
    make_transition,
    make_worker,
)


def step_kinds(html: str) -> list[str]:
    return re.findall(r'<tr class="step step-(model|tool|transition)', html)


@pytest.fixture
def outage_run(db: None) -> Run:
    return make_outage_run()


def test_steps_are_in_order_with_the_breaker_after_the_fifth_failure(
    viewer_client: Client, outage_run: Run
) -> None:
    html = viewer_client.get(f"/runs/{outage_run.pk}/").content.decode()
    assert step_kinds(html) == ["model", "tool"] + ["model", "tool"] * 5 + ["transition", "model"]


def test_model_calls_show_tokens_and_cost(viewer_client: Client, outage_run: Run) -> None:
    html = viewer_client.get(f"/runs/{outage_run.pk}/").content.decode()
    assert "5,200 / 310" in html
    assert "$0.0610" in html
    assert "$0.4270" in html  # the run's total spend


def test_tool_calls_show_outcome_attempts_and_error(viewer_client: Client, outage_run: Run) -> None:
    html = viewer_client.get(f"/runs/{outage_run.pk}/").content.decode()
    assert html.count("outcome-retryable") == 5
    assert html.count("outcome-success") == 1
    assert html.count('<td class="num text-warn">5</td>') == 5  # attempts
    assert "ToolFailure: 503 from vendor" in html
    assert "31.0 s" in html


def test_removed_tool_names_its_scope_and_moment(viewer_client: Client, outage_run: Run) -> None:
    html = viewer_client.get(f"/runs/{outage_run.pk}/").content.decode()
    removed = html.split('id="removed-title"')[1].split("</section>")[0]
    assert "web_search" in removed
    assert "run scope" in removed
    assert "09:13:06.001" in removed
    assert "5 consecutive retryable failures" in removed
    assert "step-removed" in html


def sdk_notice_after_outage() -> str:
    """What the SDK itself tells the model after five retryable failures of web_search."""
    breaker = ToolBreaker()
    for _ in range(5):
        breaker.record_failure("web_search", ToolFailure("503 from vendor", retryable=True))
    text = breaker.notice()
    assert text is not None
    return text


def test_notice_is_the_sdks_own_text(viewer_client: Client, outage_run: Run) -> None:
    html = viewer_client.get(f"/runs/{outage_run.pk}/").content.decode()
    section = html.split('id="notice-title"')[1].split("</section>")[0]
    assert escape(sdk_notice_after_outage()) in section


def test_notice_appears_with_the_first_model_call_after_the_removal(
    viewer_client: Client, outage_run: Run
) -> None:
    html = viewer_client.get(f"/runs/{outage_run.pk}/").content.decode()
    rows = re.findall(r'<tr class="(step[^"]*)"', html.split('id="steps-title"')[1])
    kinds = [row.split()[-1] for row in rows]
    assert kinds.count("step-notice") == 1
    assert kinds[kinds.index("step-notice") - 1 :][:1] == ["step-model"]
    assert kinds.index("step-removed") < kinds.index("step-notice")


def test_semantic_strikes_at_the_cap_reach_the_notice_and_a_success_clears_them(
    viewer_client: Client,
) -> None:
    run = make_run("r-semantic")
    at = run.started_at
    for step in range(1, 4):
        make_model_call(run, step=step, ts=at + timedelta(seconds=step))
        make_tool_call(
            run,
            step=step,
            ts=at + timedelta(seconds=step, milliseconds=500),
            tool="calculator",
            outcome="semantic",
            error=f"ToolFailure: bad expression {step}",
        )
    make_model_call(run, step=4, ts=at + timedelta(seconds=4))
    make_tool_call(run, step=4, ts=at + timedelta(seconds=4, milliseconds=500), tool="calculator")
    make_model_call(run, step=5, ts=at + timedelta(seconds=5))

    breaker = ToolBreaker()
    for step in range(1, 4):
        breaker.record_failure("calculator", ToolFailure(f"bad expression {step}", retryable=False))
    expected = breaker.notice()
    assert expected is not None

    html = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    steps = html.split('id="steps-title"')[1]
    assert escape(expected) in steps
    assert "No notice from this call on." in steps
    notice_section = html.split('id="notice-title"')[1].split("</section>")[0]
    assert "no usable answer" not in notice_section


def test_worker_scope_transition_from_a_sibling_run_counts(
    viewer_client: Client, outage_run: Run
) -> None:
    sibling = make_run("r-sibling", worker=outage_run.worker)
    during = outage_run.started_at + timedelta(seconds=30)
    make_transition(
        worker=outage_run.worker, run=sibling, tool="fetch_page", scope="worker", ts=during
    )
    # Outside the run's window, and on another worker: neither belongs on this page.
    make_transition(
        worker=outage_run.worker,
        tool="calendar",
        scope="worker",
        ts=outage_run.started_at - timedelta(minutes=5),
    )
    make_transition(worker=make_worker("w-other"), tool="maps", scope="worker", ts=during)
    html = viewer_client.get(f"/runs/{outage_run.pk}/").content.decode()
    removed = html.split('id="removed-title"')[1].split("</section>")[0]
    assert "fetch_page" in removed and "worker scope" in removed
    assert "(worker-wide)" in html
    assert "calendar" not in html and "maps" not in html


def test_reopened_tool_is_listed_once_at_its_first_removal(
    viewer_client: Client, outage_run: Run
) -> None:
    later = outage_run.started_at + timedelta(seconds=65)
    make_transition(worker=outage_run.worker, run=outage_run, state="half_open", ts=later)
    make_transition(
        worker=outage_run.worker, run=outage_run, ts=later + timedelta(seconds=1), reason="again"
    )
    html = viewer_client.get(f"/runs/{outage_run.pk}/").content.decode()
    removed = html.split('id="removed-title"')[1].split("</section>")[0]
    assert removed.split("<tbody>")[1].count("<tr>") == 1
    assert "again" not in removed


def test_hostile_text_is_escaped_everywhere(viewer_client: Client) -> None:
    run = make_run(HOSTILE_NAME, agent=HOSTILE_SCRIPT, worker=make_worker(HOSTILE_NAME))
    make_model_call(run, step=1, ts=run.started_at, model=HOSTILE_SCRIPT)
    make_tool_call(
        run,
        step=1,
        ts=run.started_at,
        tool=HOSTILE_NAME,
        outcome="retryable",
        error=HOSTILE_SCRIPT * 3,
    )
    make_transition(
        worker=run.worker, run=run, tool=HOSTILE_NAME, ts=run.started_at, reason=HOSTILE_SCRIPT
    )
    html = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    assert "<img src=x" not in html
    assert "<script>alert" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_bidi_override_in_a_tool_name_is_neutralised(viewer_client: Client) -> None:
    run = make_run("r-bidi")
    make_tool_call(run, step=1, ts=run.started_at, tool="web_\u202esearch")
    html = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    assert "\u202e" not in html
    assert "web_\ufffdsearch" in html


def test_unknown_run_is_404(viewer_client: Client) -> None:
    assert viewer_client.get("/runs/999999/").status_code == 404


def test_capped_timeline_says_what_was_left_out(
    viewer_client: Client, outage_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queries, "TIMELINE_MAX_TOOL_CALLS", 2)
    html = viewer_client.get(f"/runs/{outage_run.pk}/").content.decode()
    assert html.count('class="step step-tool') == 2
    assert "4 tool calls" in html


def test_query_count_does_not_grow_with_steps(
    viewer_client: Client, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    small = make_outage_run("r-small")
    with CaptureQueriesContext(connection) as small_page:
        viewer_client.get(f"/runs/{small.pk}/")
    big = make_run("r-big", worker=make_worker("w-big"))
    for step in range(300):
        at = big.started_at + timedelta(seconds=step)
        make_model_call(big, step=step, ts=at)
        make_tool_call(big, step=step, ts=at, outcome="retryable", attempts=3)
    with django_assert_max_num_queries(len(small_page.captured_queries)):
        response = viewer_client.get(f"/runs/{big.pk}/")
    assert len(step_kinds(response.content.decode())) == 600


# -- a replay's run: real timestamps, simulated step durations ---------------------------------


def make_replay_run(*, prefix: str, speed: float, worker_id: str) -> Run:
    """A run as ``simulate_outage`` leaves it: 210 ms of real time between start and finish (the
    story compressed ``speed`` times), while its steps report the story's durations."""
    OutageReplay.objects.create(
        mode="run", speed=speed, worker_prefix=prefix, started_at=T0,
        outage_started_at=T0, outage_ended_at=T0 + timedelta(seconds=1),
    )  # fmt: skip
    run = make_run(
        "r-replayed",
        worker=make_worker(worker_id),
        finished_at=T0 + timedelta(milliseconds=210),
        duration_ms=210,
    )
    make_model_call(run, step=1, ts=T0 + timedelta(milliseconds=20), duration_ms=1200)
    make_tool_call(run, step=1, ts=T0 + timedelta(milliseconds=120), duration_ms=1800)
    make_model_call(run, step=2, ts=T0 + timedelta(milliseconds=150), duration_ms=1200)
    return run


def run_duration(html: str) -> str:
    match = re.search(r"data-run-duration>(.*?)</dd>", html, re.S)
    assert match, "the run's duration is shown"
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def test_a_replay_runs_duration_is_in_the_same_time_as_its_steps(viewer_client: Client) -> None:
    # 4.2 s of story in 210 ms of real time at 20x: the steps (1.2 + 1.8 + 1.2 s) fit in it.
    run = make_replay_run(prefix="research-replay-1-run-", speed=20.0,
                          worker_id="research-replay-1-run-worker-1")  # fmt: skip
    html = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    assert run_duration(html) == "4.2 s simulated (210 ms real)"
    assert 'Duration <span class="muted">(simulated)</span>' in html  # the steps' column
    assert "data-replay-note" in html and "at 20\N{MULTIPLICATION SIGN} speed" in html
    listed = viewer_client.get("/runs/").content.decode()
    assert '4.2 s <span class="muted">sim.</span>' in listed


def test_a_replay_runs_duration_leaves_out_the_time_its_clock_stood_still(
    viewer_client: Client,
) -> None:
    # 100 ms of the run's 210 ms the replay's clock waited for the control plane: 110 ms x 20.
    run = make_replay_run(prefix="research-replay-2-fleet-", speed=20.0,
                          worker_id="research-replay-2-fleet-worker-1")  # fmt: skip
    paused = T0.timestamp() + 0.05
    OutageReplay.objects.update(pauses=[[paused, paused + 0.1], [paused + 5, paused + 6]])
    html = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    assert run_duration(html) == "2.2 s simulated (210 ms real)"
    listed = viewer_client.get("/runs/").content.decode()
    assert '2.2 s <span class="muted">sim.</span>' in listed


def test_an_ordinary_runs_durations_are_labelled_as_what_they_measure(
    viewer_client: Client, outage_run: Run
) -> None:
    html = viewer_client.get(f"/runs/{outage_run.pk}/").content.decode()
    assert run_duration(html) == "1 m 00 s"
    assert 'Duration <span class="muted">(start to finish)</span>' in html
    assert ">Call duration</th>" in html
    assert "simulated" not in html and "data-replay-note" not in html


def test_a_prefix_is_matched_literally_not_as_a_pattern(viewer_client: Client) -> None:
    # "_" and "%" are LIKE wildcards: a replay prefix made of them must not claim other workers.
    run = make_replay_run(prefix="research_replay%", speed=20.0,
                          worker_id="research-replay-x-run-worker-1")  # fmt: skip
    html = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    assert run_duration(html) == "210 ms"


def test_the_run_page_shows_the_cached_share_its_caching_rule_and_unpriced_calls(
    viewer_client: Client,
) -> None:
    run = make_run(
        "r-cache", cache_read_tokens=9000, cache_write_tokens=500, cache_input_tokens=10_000,
        unpriced_calls=1, model_spend_usd=Decimal("0.05"),
    )  # fmt: skip
    make_model_call(
        run, step=1, ts=T0, model="claude-opus-4-5", input_tokens=10_000,
        cache_read_tokens=9000, cache_write_tokens=500, cost_source="table",
    )  # fmt: skip
    make_model_call(
        run, step=2, ts=T0 + timedelta(seconds=5), model=HOSTILE_NAME, cost_usd=Decimal(0),
        cost_source="unknown",
        problem=f"not priced: the genai-prices table does not know model {HOSTILE_NAME!r}",
    )  # fmt: skip

    html = viewer_client.get(f"/runs/{run.pk}/").content.decode()

    assert re.search(r"data-cached-share>90%<", html)  # cached share of input
    assert "data-cache-rules" in html and "Anthropic" in html and "5 minutes" in html
    assert "at least $0.05" in html and "Not priced" in html and "1 call<" in html
    assert "data-price-unknown" in html and "does not know model" in html
    assert HOSTILE_NAME not in html
