"""The ControlPlane client against a live control plane: every event lands once, whatever the
network does in between. Servers are real (pytest-django's live server, or gunicorn started and
stopped by the test); waits poll with deadlines."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pytest_django.live_server_helper import LiveServer

from breaker_panel import ToolFailure
from breaker_panel.client import ControlPlane, PlaneConfig
from breaker_panel.client.ids import process_ids
from runs.models import AgentToken, IngestedEvent, ModelCall, ReportedTransition, Run, ToolCall
from runs.models import Worker as WorkerRow
from scripts.testing.processes import WebServerProcess
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "web_search"}},
    {"type": "function", "function": {"name": "read_page"}},
]


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


@pytest.fixture
def token(transactional_db: None) -> str:
    _, raw = AgentToken.issue(name="sdk-e2e")
    return raw


@pytest.fixture
def make_plane() -> Iterator[Callable[..., ControlPlane]]:
    planes: list[ControlPlane] = []

    def make(url: str, token: str, **settings: Any) -> ControlPlane:
        defaults: dict[str, Any] = {
            "flush_interval": 0.05, "fleet_poll_interval": 0.1,
            "backoff_base": 0.05, "backoff_max": 0.3, "timeout": 5.0,
        }  # fmt: skip
        config = PlaneConfig(**(defaults | settings))
        plane = ControlPlane(url, token=token, worker_id="w-e2e", config=config)
        planes.append(plane)
        return plane

    yield make
    for plane in planes:
        plane.close(timeout=2)


def play_scripted_run(plane: ControlPlane) -> tuple[int, object]:
    """A research run that loses web_search after 5 retryable failures. Returns events emitted."""
    run = plane.start_run(agent="research", step_budget=20)
    emitted = 1
    for step in range(1, 8):
        run.record_model_call(
            model="gpt-test", input_tokens=1000, output_tokens=100, cost_usd=0.01, duration_ms=900
        )
        emitted += 1
        if "web_search" in names(run.available(TOOLS)):
            run.record_failure(
                "web_search", ToolFailure("503 from vendor", attempts=5), duration_ms=31000
            )
        else:
            run.record_success("read_page", duration_ms=400)
        emitted += 1
        assert run.step == step
    run.finish(status="completed")
    emitted += 1
    # 5th failure: run scope and worker scope both open (one transition event each).
    return emitted + 2, run


def test_a_scripted_run_lands_once_with_its_totals(
    live_server: LiveServer, token: str, make_plane: Callable[..., ControlPlane]
) -> None:
    plane = make_plane(live_server.url, token)

    emitted, run = play_scripted_run(plane)

    assert plane.close(timeout=10)
    assert plane.stats.accepted == emitted
    assert (plane.stats.duplicates, plane.stats.rejected, plane.stats.dropped) == (0, 0, 0)
    assert IngestedEvent.objects.count() == emitted
    row = Run.objects.get(run_id=run.run_id)  # type: ignore[attr-defined]
    assert (row.agent, row.step_budget, row.status, row.degraded, row.steps) == (
        "research", 20, "completed", True, 7,
    )  # fmt: skip
    assert (row.model_calls, row.input_tokens, row.model_spend_usd) == (7, 7000, Decimal("0.07"))
    assert (row.tool_calls, row.tool_failures, row.tool_attempts) == (7, 5, 27)
    assert ToolCall.objects.filter(tool="web_search", outcome="retryable").count() == 5
    assert list(ToolCall.objects.order_by("ts").values_list("step", flat=True)) == list(range(1, 8))
    assert ModelCall.objects.count() == 7
    transitions = set(ReportedTransition.objects.values_list("scope", "tool", "state"))
    assert transitions == {("run", "web_search", "open"), ("worker", "web_search", "open")}
    worker_transition = ReportedTransition.objects.get(scope="worker")
    assert worker_transition.run is None
    assert WorkerRow.objects.get().worker_id == "w-e2e"


def test_the_next_run_of_the_worker_starts_without_the_broken_tool(
    live_server: LiveServer, token: str, make_plane: Callable[..., ControlPlane]
) -> None:
    plane = make_plane(live_server.url, token)
    play_scripted_run(plane)

    second = plane.start_run(agent="research", step_budget=20)

    assert names(second.available(TOOLS)) == ["read_page"]
    notice = second.notice()
    assert notice is not None and "web_search" in notice
    # The second run lost the tool to the worker breaker: reported as seen by that run.
    assert plane.close(timeout=10)
    seen = ReportedTransition.objects.get(run__run_id=second.run_id)
    assert (seen.scope, seen.tool, seen.state) == ("worker", "web_search", "open")


def test_control_plane_down_then_up_every_buffered_event_arrives_once(
    token: str, make_plane: Callable[..., ControlPlane]
) -> None:
    server = WebServerProcess(workers=2, threads=2)  # its port is chosen, nothing listens yet
    try:
        plane = make_plane(server.url, token)
        emitted, run = play_scripted_run(plane)
        wait_for(lambda: plane.stats.failed_attempts >= 2)  # it did try, and failed
        assert IngestedEvent.objects.count() == 0
        assert plane.pending() == emitted

        server.start()
        assert plane.flush(timeout=20)
    finally:
        server.stop()

    # Every event landed once. On a loaded machine the first answer of a freshly started
    # gunicorn can come after the client's request timeout: the batch was applied, and the
    # resend is answered as duplicates. So `accepted` alone may be 0 after a flush() that
    # rightly returned True (tests/sdk/test_sender_server_errors.py shows it deterministically).
    assert plane.stats.accepted + plane.stats.duplicates == emitted
    assert plane.stats.dropped == 0
    assert IngestedEvent.objects.count() == emitted
    assert Run.objects.get(run_id=run.run_id).tool_calls == 7  # type: ignore[attr-defined]


def test_a_full_buffer_drops_new_events_and_reports_how_many(
    token: str, make_plane: Callable[..., ControlPlane]
) -> None:
    server = WebServerProcess(workers=1, threads=2)
    try:
        plane = make_plane(server.url, token, max_buffer=10, batch_size=5)
        run = plane.start_run(agent="research")
        for _ in range(24):
            run.record_success("read_page")
        assert plane.stats.dropped == 15

        server.start()
        assert plane.flush(timeout=20)
        wait_for(lambda: plane.stats.dropped_reported == 15)
    finally:
        server.stop()

    assert (
        IngestedEvent.objects.filter(event_id__contains=":" + process_ids.prefix).count() == 10 + 1
    )
    assert WorkerRow.objects.get(worker_id="w-e2e").dropped_events == 15


def test_a_fleet_kill_switch_takes_the_tool_out_of_running_runs(
    live_server: LiveServer, token: str, make_plane: Callable[..., ControlPlane]
) -> None:
    _, operator = AgentToken.issue(name="on-call", is_operator=True)
    plane = make_plane(live_server.url, token)
    run = plane.start_run(agent="research")
    run.record_success("web_search")  # the fleet learns of a tool from its first reported call
    assert plane.flush(timeout=10)
    assert names(run.available(TOOLS)) == ["web_search", "read_page"]

    request = urllib.request.Request(
        live_server.url + "/api/v1/tools/web_search/force-open",
        data=json.dumps({"reason": "vendor incident 4711"}).encode(),
        headers={"Authorization": f"Bearer {operator}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200

    wait_for(lambda: names(run.available(TOOLS)) == ["read_page"])
    notice = run.notice()
    assert notice is not None and "web_search" in notice
    assert run.removals()["web_search"].scope == "fleet"
    assert plane.stats.fleet_polls > 0


def test_a_plane_pointed_at_nothing_never_raises_into_the_agent(
    make_plane: Callable[..., ControlPlane],
) -> None:
    plane = make_plane("http://127.0.0.1:9", "bp_nothing", max_buffer=50, batch_size=10)
    run = plane.start_run(agent="research")
    for _ in range(100):
        run.record_failure("web_search", ConnectionError("refused"))
    run.finish(status="failed")

    assert names(run.available(TOOLS)) == ["read_page"]
    # run.started, 100 failures, the run's and the worker's transition, run.finished: 104.
    assert plane.stats.dropped == 104 - 50
    assert plane.close(timeout=0.3) is False  # undeliverable, and close() still returns


def _child_ids(queue: multiprocessing.Queue[list[str]]) -> None:
    queue.put([process_ids.new() for _ in range(1000)])


# The children only make ids; the warning is about threads the live server may have left.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_event_ids_are_unique_across_forked_processes() -> None:
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[list[str]] = context.Queue()
    children = [context.Process(target=_child_ids, args=(queue,)) for _ in range(2)]
    for child in children:
        child.start()
    ids = [process_ids.new() for _ in range(1000)] + queue.get(timeout=30) + queue.get(timeout=30)
    for child in children:
        child.join(timeout=30)

    assert len(set(ids)) == 3000


EXIT_SCRIPT = """
import sys
from breaker_panel import ControlPlane, PlaneConfig
plane = ControlPlane(
    sys.argv[1], token=sys.argv[2], worker_id="w-exit", config=PlaneConfig(flush_interval=60)
)
run = plane.start_run(agent="research", run_id="r-exit")
run.record_success("read_page")
run.finish()
# No close(): the interpreter's exit has to flush (flush_interval alone would wait a minute).
"""


def test_interpreter_exit_flushes_what_is_buffered(live_server: LiveServer, token: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, live_server.url, token],
        cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert Run.objects.get(run_id="r-exit").status == "completed"
    assert ToolCall.objects.filter(run__run_id="r-exit").count() == 1


def test_the_sdk_reports_cache_counts_and_lets_the_control_plane_price_the_call(
    live_server: LiveServer, token: str, make_plane: Callable[..., ControlPlane]
) -> None:
    plane = make_plane(live_server.url, token)
    run = plane.start_run(agent="research", step_budget=20)
    run.record_model_call(
        model="claude-opus-4-5", provider="anthropic", input_tokens=12_000, output_tokens=200,
        cache_read_tokens=10_000, cache_write_tokens=1_500,
    )  # fmt: skip
    run.record_model_call(model="no-such-model-9", input_tokens=100, output_tokens=5)
    run.finish(status="completed")
    assert plane.close(timeout=10)
    assert plane.stats.rejected == 0

    priced, unknown = ModelCall.objects.order_by("step")
    assert (priced.cache_read_tokens, priced.cache_write_tokens) == (10_000, 1_500)
    assert priced.cost_source == "table" and priced.cost_usd > 0
    assert unknown.cost_source == "unknown" and "no-such-model-9" in unknown.problem
    row = Run.objects.get()
    assert row.unpriced_calls == 1 and row.cached_share == pytest.approx(
        10_000 / 12_000
    )  # the other call said nothing of caching
