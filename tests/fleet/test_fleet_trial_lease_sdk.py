"""End to end: the half-open trial lease of a tool without a probe, with two real SDK clients.

Two agent workers (two ControlPlane clients, two worker ids) against the control plane under
gunicorn. Their failures open the fleet breaker of a tool that has no probe and a short cooldown
(set through the policy service); Celery's tick (``fleet_tick()``, called here) makes it
half-open. Each client's poll thread asks for the trial lease; the control plane grants it to
one of them, and exactly one run across both workers is offered the tool. Its call decides: a
success closes the breaker and new runs get the tool back; a retryable failure re-opens it with
a doubled cooldown, and the next half-open window gets a trial of its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from breaker_panel import ToolFailure
from breaker_panel.client import ControlPlane, PlaneConfig, Run
from breaker_panel.client.plane import MAX_TRIAL_WAIT
from breakers.fleet_service import fleet_state as rebuild_if_lost
from breakers.fleet_service import fleet_tick, tool_policy_update
from breakers.models import FleetTransition, Tool
from scripts.testing.processes import WebServerProcess
from tests.fleet.support import bound_token
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

TOOL = "web_search"
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": TOOL}},
    {"type": "function", "function": {"name": "calculator"}},
]
CALCULATOR: list[dict[str, Any]] = [{"type": "function", "function": {"name": "calculator"}}]
COOLDOWN_S = 0.5
DOWN = ToolFailure("503 from vendor", retryable=True, attempts=5)
RUNS_PER_WORKER = 3


@pytest.fixture(scope="module")
def web_server(django_db_setup: None) -> Iterator[WebServerProcess]:
    with WebServerProcess(workers=2, threads=4) as server:
        yield server.start()


def offers_tool(run: Run) -> bool:
    return TOOL in [tool["function"]["name"] for tool in run.available(TOOLS)]


def fleet_state(plane: ControlPlane) -> str | None:
    status = plane.fleet.snapshot().get(TOOL)
    return None if status is None else str(status.state)


def wait_for_fleet_state(plane: ControlPlane, state: str) -> None:
    wait_for(lambda: fleet_state(plane) == state, f"{plane.worker_id} to see {state}")


def db_state() -> str:
    return str(Tool.objects.get(name=TOOL).state)


@pytest.fixture
def planes(
    web_server: WebServerProcess, transactional_db: None, fleet_redis: redis.Redis
) -> Iterator[tuple[ControlPlane, ControlPlane]]:
    # Rebuild the (emptied) fleet store now: otherwise the planes' first polls make the web
    # server rebuild it while the test writes the tool's policy, and the policy can be lost.
    rebuild_if_lost()
    config = PlaneConfig(
        flush_interval=0.05, fleet_poll_interval=0.05, trial_retry_interval=0.2, timeout=5.0
    )
    # One token per worker, bound to it: the default quorum counts tokens.
    plane_a = ControlPlane(
        web_server.url, token=bound_token("worker-a"), worker_id="worker-a", config=config
    )
    plane_b = ControlPlane(
        web_server.url, token=bound_token("worker-b"), worker_id="worker-b", config=config
    )
    yield plane_a, plane_b
    for plane in (plane_a, plane_b):
        plane.close(timeout=5)


def open_without_probe(plane_a: ControlPlane, plane_b: ControlPlane) -> list[Run]:
    """A tool without a probe, a short cooldown, opened by failures from both workers.

    Returns the two runs that saw it fail; they stay in progress (a worker with no run in
    progress does not ask for the trial lease).
    """
    Tool.objects.create(name=TOOL)
    tool_policy_update(
        tool_name=TOOL,
        changes={"cooldown_seconds": COOLDOWN_S, "max_cooldown_seconds": 4 * COOLDOWN_S},
        actor="test",
    )
    run_a = plane_a.start_run(agent="research", step_budget=20)
    run_b = plane_b.start_run(agent="research", step_budget=20)
    for _ in range(3):  # fewer than 5 per worker: neither worker breaker opens on its own
        run_a.record_failure(TOOL, DOWN)
    assert plane_a.flush()
    for _ in range(2):
        run_b.record_failure(TOOL, DOWN)
    assert plane_b.flush()
    assert db_state() == "open"
    for plane in (plane_a, plane_b):
        wait_for_fleet_state(plane, "open")
    assert not offers_tool(run_a) and not offers_tool(run_b)
    return [run_a, run_b]


def tick_until_half_open() -> None:
    def tick() -> bool:
        fleet_tick()  # Celery beat's tick, called directly; the cooldown runs in real time
        return db_state() == "half_open"

    wait_for(tick, "half-open")


def the_one_trial_run(plane_a: ControlPlane, plane_b: ControlPlane) -> tuple[ControlPlane, Run]:
    """Wait until one worker holds the lease, start runs on both: exactly one gets the tool."""
    wait_for(lambda: plane_a.fleet.trials() or plane_b.fleet.trials(), "a granted lease")
    holders = [plane for plane in (plane_a, plane_b) if plane.fleet.trials()]
    assert len(holders) == 1, "the control plane grants one lease at a time"
    runs = [
        (plane, plane.start_run(agent="research", step_budget=20))
        for _ in range(RUNS_PER_WORKER)
        for plane in (plane_a, plane_b)
    ]
    offered = [(plane, run) for plane, run in runs if offers_tool(run)]
    assert len(offered) == 1, "exactly one run across both workers is offered the tool"
    assert offered[0][0] is holders[0]
    others = [run for _, run in runs if run is not offered[0][1]]
    assert not any(offers_tool(run) for run in others)  # asking again changes nothing
    return offered[0]


def test_the_trial_runs_success_closes_the_breaker_for_every_new_run(
    planes: tuple[ControlPlane, ControlPlane],
) -> None:
    plane_a, plane_b = planes
    early = open_without_probe(plane_a, plane_b)
    tick_until_half_open()
    holder, trial_run = the_one_trial_run(plane_a, plane_b)

    trial_run.record_success(TOOL)
    assert holder.flush()
    assert db_state() == "closed"
    closing = FleetTransition.objects.get(tool__name=TOOL, to_state="closed")
    assert closing.from_state == "half_open"
    assert closing.cause["holder"] == f"agent:{holder.worker_id}"
    assert closing.cause["outcome"] == "success"

    for plane in (plane_a, plane_b):
        wait_for_fleet_state(plane, "closed")
        assert offers_tool(plane.start_run(agent="research"))
    assert offers_tool(trial_run)
    assert not any(offers_tool(run) for run in early)  # removed from a run: for good
    assert plane_a.fleet.trials() == {} and plane_b.fleet.trials() == {}
    assert plane_a.stats.rejected == plane_b.stats.rejected == 0


def test_the_trial_runs_failure_reopens_with_a_longer_cooldown(
    planes: tuple[ControlPlane, ControlPlane],
) -> None:
    plane_a, plane_b = planes
    early = open_without_probe(plane_a, plane_b)
    tick_until_half_open()
    holder, trial_run = the_one_trial_run(plane_a, plane_b)

    trial_run.record_failure(TOOL, DOWN)
    assert not offers_tool(trial_run)  # at once, without waiting for the fleet
    assert "503 from vendor" in (trial_run.notice() or "")
    assert holder.flush()
    assert db_state() == "open"
    reopening = FleetTransition.objects.get(tool__name=TOOL, from_state="half_open")
    assert reopening.to_state == "open"
    assert reopening.cause["holder"] == f"agent:{holder.worker_id}"
    assert reopening.cause["cooldown_ms"] == 2 * COOLDOWN_S * 1000  # backed off from 500 ms
    fleet_tick()
    assert db_state() == "open"  # not due yet

    # The next half-open window (after the doubled cooldown) gets one trial of its own.
    tick_until_half_open()
    second_window = FleetTransition.objects.filter(tool__name=TOOL, to_state="half_open").last()
    assert second_window is not None and second_window.seq > reopening.seq
    assert (second_window.at - reopening.at).total_seconds() >= 2 * COOLDOWN_S
    holder_2, trial_run_2 = the_one_trial_run(plane_a, plane_b)
    trial_run_2.record_success(TOOL)
    assert holder_2.flush()
    assert db_state() == "closed"
    windows = list(
        FleetTransition.objects.filter(tool__name=TOOL, from_state="half_open")
        .order_by("seq")
        .values_list("cause__window", flat=True)
    )
    assert windows == [1, 2]
    assert not offers_tool(trial_run) and not any(offers_tool(run) for run in early)


# -- issue 23: who asks for the trial, and when ---------------------------------------------

SHORT_RUNS = 20  # played one after another, 0.2 s apart: far shorter than a held long-poll


def short_run(plane: ControlPlane, **start: Any) -> bool:
    """One short run, as the demo's agents make: offer the tools, call the tool if offered,
    finish. True if it made the tool's (trial) call."""
    with plane.start_run(agent="research", step_budget=20, **start) as run:
        if not offers_tool(run):
            return False
        run.record_success(TOOL)
        return True


def test_short_runs_that_start_while_the_tool_is_half_open_take_its_trial(
    planes: tuple[ControlPlane, ControlPlane],
) -> None:
    # The demo's case: every run ends long before the next fleet poll, so no run is in
    # progress when the tool goes half-open, nor when a held long-poll ends.
    plane_a, plane_b = planes
    for run in open_without_probe(plane_a, plane_b):
        run.finish()
    tick_until_half_open()
    wait_for_fleet_state(plane_a, "half_open")

    calls = 0
    for _ in range(SHORT_RUNS):
        calls += short_run(plane_a)
        if calls:
            break
        time.sleep(0.2)

    assert calls == 1, "a short run that started while the tool was half-open made the trial"
    assert plane_a.flush()
    assert db_state() == "closed"
    closing = FleetTransition.objects.get(tool__name=TOOL, to_state="closed")
    assert closing.cause["holder"] == "agent:worker-a"


def test_a_run_start_that_waits_for_the_lease_makes_the_trial_itself(
    planes: tuple[ControlPlane, ControlPlane],
) -> None:
    plane_a, plane_b = planes
    for run in open_without_probe(plane_a, plane_b):
        run.finish()
    tick_until_half_open()
    wait_for_fleet_state(plane_a, "half_open")

    assert short_run(plane_a, trial_wait=MAX_TRIAL_WAIT)  # the very first run after half-open
    assert plane_a.flush()
    assert db_state() == "closed"


def test_a_worker_whose_runs_never_offer_the_tool_never_asks_for_its_trial(
    planes: tuple[ControlPlane, ControlPlane], web_server: WebServerProcess
) -> None:
    # Another agent's worker, running only calculator the whole time the tool is half-open.
    calculator = ControlPlane(
        web_server.url,
        token=bound_token("calculator-1"),
        worker_id="calculator-1",
        config=PlaneConfig(flush_interval=0.05, fleet_poll_interval=0.05, trial_retry_interval=0.2),
    )
    try:
        plane_a, plane_b = planes
        running = calculator.start_run(agent="calculator", step_budget=20)
        assert running.available(CALCULATOR) == CALCULATOR
        early = open_without_probe(plane_a, plane_b)
        tick_until_half_open()
        wait_for_fleet_state(calculator, "half_open")
        holder, trial_run = the_one_trial_run(plane_a, plane_b)
        assert running.available(CALCULATOR) == CALCULATOR
        trial_run.record_success(TOOL)
        assert holder.flush()
        assert db_state() == "closed"
        assert running.available(CALCULATOR) == CALCULATOR
        running.finish()
        assert early  # A's and B's runs stayed in progress, so both asked
        assert plane_a.stats.trial_requests + plane_b.stats.trial_requests >= 2
    finally:
        calculator.close(timeout=5)
    assert calculator.stats.trial_requests == 0
    assert calculator.fleet.trials() == {}
