"""The fleet half-open trial lease of a tool without a probe, on the agent's side.

While this worker holds the fleet's trial lease, exactly one run (the first to ask that still
has the tool) sees the half-open tool in `available()`; its next call of the tool is the trial.
The client asks for the lease on its poll thread (here against a small scripted HTTP server);
runs never touch the network. Clocks are fake: nothing sleeps.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from breaker_panel import (
    ControlPlane,
    PlaneConfig,
    RunBreakers,
    Scope,
    State,
    ToolFailure,
    WorkerBreakers,
)
from breaker_panel.client.fleet_sync import read_grant
from breaker_panel.client.plane import MAX_TRIAL_WAIT
from breaker_panel.external_scope import ExternalScope, ScopeState
from breaker_panel.toolsets import tool_name
from scripts.testing.events_server import JsonHandler, LocalServer
from tests.sdk.support import FakeClock, chat_tools
from tests.waiting import wait_for

TOOLS = chat_tools("web_search", "calculator")
DOWN = ToolFailure("503 from vendor", retryable=True)
BAD_ARGS = ToolFailure("400: query too long", retryable=False)
SINCE = "2026-11-29T09:12:04.000Z"
HALF_OPEN = ScopeState(
    State.HALF_OPEN, "cooldown of 30 s elapsed; one trial call", trial="lease", since=SINCE
)
LEASE_SECONDS = 120.0


def offered(run: RunBreakers) -> list[str | None]:
    return [tool_name(tool) for tool in run.available(TOOLS)]


@pytest.fixture
def fleet(clock: FakeClock) -> ExternalScope:
    return ExternalScope(Scope.FLEET, clock=clock)


@pytest.fixture
def worker(clock: FakeClock) -> WorkerBreakers:
    return WorkerBreakers(clock=clock)


def start(worker: WorkerBreakers, fleet: ExternalScope) -> RunBreakers:
    return worker.start_run(sources=[fleet])


def half_open_with_lease(fleet: ExternalScope, clock: FakeClock) -> None:
    """The fleet says half-open (trial by lease), a run of this worker offered the tool, and
    the control plane granted this worker the lease."""
    fleet.update({"web_search": HALF_OPEN})
    fleet.note_offered("web_search")
    assert fleet.trials_to_request() == [("web_search", HALF_OPEN)]
    assert fleet.grant_trial("web_search", HALF_OPEN, window=3, expires_at=clock() + LEASE_SECONDS)


# -- which run gets the tool ----------------------------------------------------------------


def test_without_the_lease_every_run_has_the_half_open_tool_removed(
    worker: WorkerBreakers, fleet: ExternalScope
) -> None:
    fleet.update({"web_search": HALF_OPEN})
    run = start(worker, fleet)
    assert offered(run) == ["calculator"]
    assert run.removals()["web_search"].scope is Scope.FLEET
    # The model is told it is gone, never that a trial call is allowed.
    assert "web_search: failing for other agents right now" in (run.notice() or "")
    assert "trial" not in (run.notice() or "")


def test_the_first_run_to_ask_gets_the_tool_and_the_others_do_not(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    half_open_with_lease(fleet, clock)
    first, second, third = (start(worker, fleet) for _ in range(3))
    assert offered(first) == ["web_search", "calculator"]
    assert offered(second) == ["calculator"]
    assert offered(third) == ["calculator"]
    assert offered(first) == ["web_search", "calculator"]  # asking again keeps it
    assert first.fleet_trials() == ("web_search",)
    assert fleet.trials()["web_search"].window == 3


def test_a_run_that_removed_the_tool_earlier_never_gets_the_lease(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    early = start(worker, fleet)
    fleet.update({"web_search": ScopeState(State.OPEN, "5 failures from 2 workers")})
    assert offered(early) == ["calculator"]
    half_open_with_lease(fleet, clock)
    assert offered(early) == ["calculator"]
    assert offered(start(worker, fleet)) == ["web_search", "calculator"]


def test_a_probe_trial_is_never_made_by_a_run(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    probed = ScopeState(State.HALF_OPEN, "cooldown elapsed; one trial probe", trial="probe")
    fleet.update({"web_search": probed})
    assert fleet.trials_to_request() == []
    fleet.grant_trial("web_search", probed, window=1, expires_at=clock() + LEASE_SECONDS)
    assert offered(start(worker, fleet)) == ["calculator"]


@pytest.mark.parametrize(
    ("state", "kept"),
    [
        (State.OPEN, False),
        (State.FORCED_OPEN, False),
        (State.FORCED_CLOSED, True),
        (State.CLOSED, True),
    ],
)
def test_other_fleet_states_drop_the_lease_and_keep_their_meaning(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock, state: State, kept: bool
) -> None:
    half_open_with_lease(fleet, clock)
    holder = start(worker, fleet)
    assert "web_search" in offered(holder)
    fleet.update({"web_search": ScopeState(state, "operator or breaker", since="later")})
    assert fleet.trials() == {}
    assert ("web_search" in offered(holder)) is kept
    assert ("web_search" in offered(start(worker, fleet))) is kept
    assert holder.fleet_trials() == ()


# -- what the trial call does ---------------------------------------------------------------


def test_a_successful_trial_gives_the_tool_back_to_this_workers_new_runs(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    fleet.update({"web_search": HALF_OPEN})
    early = start(worker, fleet)
    assert offered(early) == ["calculator"]  # half-open before any lease: removed for good
    half_open_with_lease(fleet, clock)
    holder, other = start(worker, fleet), start(worker, fleet)
    assert offered(holder) == ["web_search", "calculator"]
    assert offered(other) == ["calculator"]
    holder.record_success("web_search")
    assert fleet.trials() == {}  # the lease is used up
    assert fleet.trials_to_request() == []  # and not asked for again while the fleet decides
    # This worker's later calls reach the control plane after the trial's: safe to call it.
    assert offered(holder) == ["web_search", "calculator"]
    assert offered(start(worker, fleet)) == ["web_search", "calculator"]
    assert offered(other) == ["calculator"]
    fleet.update({"web_search": ScopeState(State.CLOSED, "trial call succeeded", since="later")})
    assert offered(start(worker, fleet)) == ["web_search", "calculator"]
    assert offered(early) == ["calculator"] and offered(other) == ["calculator"]


def test_a_failed_trial_takes_the_tool_from_the_holder_with_its_error(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    removed: list[str] = []
    half_open_with_lease(fleet, clock)
    holder = worker.start_run(sources=[fleet], on_remove=lambda r: removed.append(r.tool))
    assert offered(holder) == ["web_search", "calculator"]
    holder.record_failure("web_search", DOWN)
    assert offered(holder) == ["calculator"]
    assert removed == ["web_search"]
    removal = holder.removals()["web_search"]
    assert (removal.scope, removal.reason) == (Scope.FLEET, "its half-open trial call failed")
    assert "- web_search: it keeps failing (last error: 503 from vendor)" in (holder.notice() or "")
    assert offered(start(worker, fleet)) == ["calculator"]  # nobody else tries this window
    assert fleet.trials_to_request() == []
    # The fleet re-opens, then a new half-open window: the lease is asked for again.
    fleet.update({"web_search": ScopeState(State.OPEN, "trial call failed", since="t2")})
    assert fleet.trials_to_request() == []
    again = ScopeState(State.HALF_OPEN, "cooldown of 60 s elapsed", trial="lease", since="t3")
    fleet.update({"web_search": again})
    assert fleet.trials_to_request() == [("web_search", again)]


def test_a_semantic_trial_keeps_the_holder_and_asks_for_the_lease_again(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    half_open_with_lease(fleet, clock)
    holder, other = start(worker, fleet), start(worker, fleet)
    assert offered(holder) == ["web_search", "calculator"]
    holder.record_failure("web_search", BAD_ARGS)
    assert offered(holder) == ["web_search", "calculator"]
    assert offered(other) == ["calculator"]
    # The control plane freed the lease on the semantic call: ask for it back.
    assert fleet.trials_to_request() == [("web_search", HALF_OPEN)]
    fleet.grant_trial("web_search", HALF_OPEN, window=3, expires_at=clock() + LEASE_SECONDS)
    assert fleet.trials_to_request() == []
    holder.record_success("web_search")
    assert offered(holder) == ["web_search", "calculator"]
    assert fleet.trials() == {}


def test_a_semantic_trial_whose_lease_went_elsewhere_loses_the_tool(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    half_open_with_lease(fleet, clock)
    holder = start(worker, fleet)
    assert "web_search" in offered(holder)
    holder.record_failure("web_search", BAD_ARGS)
    fleet.refuse_trial("web_search", HALF_OPEN, retry_at=clock() + 5)
    assert offered(holder) == ["calculator"]
    assert offered(start(worker, fleet)) == ["calculator"]


def test_calls_of_other_runs_and_other_tools_decide_nothing(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    half_open_with_lease(fleet, clock)
    holder, other = start(worker, fleet), start(worker, fleet)
    offered(holder), offered(other)
    other.record_failure("web_search", DOWN)  # a late result of a call started before
    holder.record_success("calculator")
    assert "web_search" in fleet.trials()
    assert offered(holder) == ["web_search", "calculator"]


# -- leases that are not used ---------------------------------------------------------------


def test_an_unused_lease_expires_and_is_asked_for_again(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    half_open_with_lease(fleet, clock)
    holder = start(worker, fleet)
    assert "web_search" in offered(holder)
    clock.advance(LEASE_SECONDS - 1)
    assert "web_search" in offered(holder)
    clock.advance(1)
    assert offered(holder) == ["calculator"]  # the lease lapsed: the holder's chance is gone
    assert fleet.trials() == {}
    assert fleet.trials_to_request() == [("web_search", HALF_OPEN)]
    fleet.grant_trial("web_search", HALF_OPEN, window=3, expires_at=clock() + LEASE_SECONDS)
    assert offered(holder) == ["calculator"]
    assert offered(start(worker, fleet)) == ["web_search", "calculator"]


def test_an_expired_lease_is_dropped_by_the_poll_as_well(
    fleet: ExternalScope, clock: FakeClock
) -> None:
    half_open_with_lease(fleet, clock)
    assert fleet.trials_to_request() == []
    clock.advance(LEASE_SECONDS)
    assert fleet.trials_to_request() == [("web_search", HALF_OPEN)]
    assert fleet.trials() == {}


def test_a_closed_run_hands_its_unused_lease_to_the_next_run(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    half_open_with_lease(fleet, clock)
    holder, other = start(worker, fleet), start(worker, fleet)
    assert "web_search" in offered(holder)
    assert offered(other) == ["calculator"]
    holder.close()
    assert offered(other) == ["calculator"]  # it lost the tool for good
    assert offered(start(worker, fleet)) == ["web_search", "calculator"]


def test_a_refused_lease_is_asked_for_again_after_the_retry_time(
    fleet: ExternalScope, clock: FakeClock
) -> None:
    fleet.update({"web_search": HALF_OPEN})
    fleet.note_offered("web_search")
    fleet.refuse_trial("web_search", HALF_OPEN, retry_at=clock() + 5)
    assert fleet.trials_to_request() == []
    clock.advance(5)
    assert fleet.trials_to_request() == [("web_search", HALF_OPEN)]


def test_a_new_half_open_window_forgets_the_last_windows_lease(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    half_open_with_lease(fleet, clock)
    holder = start(worker, fleet)
    assert "web_search" in offered(holder)
    # The polls missed the open in between: only `since` tells the windows apart.
    later = ScopeState(HALF_OPEN.state, HALF_OPEN.reason, trial="lease", since="later")
    fleet.update({"web_search": later})
    assert fleet.trials() == {}
    assert offered(holder) == ["calculator"]
    assert fleet.trials_to_request() == [("web_search", later)]


def test_a_grant_for_an_entry_that_changed_meanwhile_is_ignored(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    fleet.update({"web_search": HALF_OPEN})
    fleet.note_offered("web_search")
    [(name, asked_for)] = fleet.trials_to_request()
    fleet.update({"web_search": ScopeState(State.CLOSED, "trial call succeeded", since="t2")})
    assert not fleet.grant_trial(name, asked_for, window=3, expires_at=clock() + 120)
    assert fleet.trials() == {}


# -- worker scope and fleet scope together --------------------------------------------------


def test_a_run_without_the_fleet_lease_hands_back_the_worker_trial(
    fleet: ExternalScope, clock: FakeClock
) -> None:
    worker = WorkerBreakers(threshold=1, clock=clock)
    worker.record_failure("web_search", DOWN)
    clock.advance(worker.cooldown("web_search"))
    fleet.update({"web_search": HALF_OPEN})  # the fleet is half-open, with no lease here yet
    run = start(worker, fleet)
    assert offered(run) == ["calculator"]
    assert run.trials() == {}
    assert worker.acquire_trial("web_search") is not None  # the worker trial was handed back


def test_the_holder_of_both_trials_decides_both(fleet: ExternalScope, clock: FakeClock) -> None:
    worker = WorkerBreakers(threshold=1, clock=clock)
    worker.record_failure("web_search", DOWN)
    clock.advance(worker.cooldown("web_search"))
    half_open_with_lease(fleet, clock)
    run = start(worker, fleet)
    assert offered(run) == ["web_search", "calculator"]
    run.record_success("web_search")
    assert worker.state("web_search") is State.CLOSED
    assert fleet.trials() == {}


# -- many threads, one trial ----------------------------------------------------------------


@pytest.fixture
def frequent_thread_switches() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # let races show
    yield
    sys.setswitchinterval(before)


def offers_in_a_race(runs: list[RunBreakers]) -> list[list[str | None]]:
    """Every run asks for its tools at once, each on its own thread."""
    barrier = threading.Barrier(len(runs))
    offers: list[list[str | None]] = [[] for _ in runs]

    def body(index: int) -> None:
        barrier.wait()
        offers[index] = offered(runs[index])

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(runs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return offers


@pytest.mark.usefixtures("frequent_thread_switches")
def test_exactly_one_of_many_concurrent_runs_gets_the_fleet_trial(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    for window in range(10):
        status = ScopeState(State.HALF_OPEN, "cooldown", trial="lease", since=f"w{window}")
        fleet.update({"web_search": status})
        fleet.grant_trial("web_search", status, window=window, expires_at=clock() + 120)
        offers = offers_in_a_race([start(worker, fleet) for _ in range(16)])
        assert sum("web_search" in names for names in offers) == 1


# -- the hot path ---------------------------------------------------------------------------


class CountingScope(ExternalScope):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__(Scope.FLEET, clock=clock)
        self.reads = 0

    def snapshot(self) -> Any:
        self.reads += 1
        return super().snapshot()


def test_a_run_reads_the_fleet_again_only_when_it_changed(
    worker: WorkerBreakers, clock: FakeClock
) -> None:
    fleet = CountingScope(clock)
    states = {"calculator": ScopeState(State.CLOSED), "web_search": ScopeState(State.CLOSED)}
    fleet.update(states)
    run = start(worker, fleet)
    for _ in range(5):
        offered(run)
    assert fleet.reads == 1
    fleet.update(dict(states))  # the same states again (most ingest replies): no change
    offered(run)
    assert fleet.reads == 1
    fleet.update({"web_search": ScopeState(State.OPEN, "down")})
    assert offered(run) == ["calculator"]
    offered(run)
    assert fleet.reads == 2


def test_a_source_without_a_version_is_read_on_every_step(worker: WorkerBreakers) -> None:
    class Fleet:
        scope = Scope.FLEET
        reads = 0

        def snapshot(self) -> dict[str, ScopeState]:
            self.reads += 1
            return {}

    source = Fleet()
    run = worker.start_run(sources=[source])
    for _ in range(3):
        offered(run)
    assert source.reads == 3


# -- the client: asking for the lease on the poll thread --------------------------------------


class TrialServer(LocalServer):
    """A scripted control plane on a free local port: ``GET /api/v1/fleet`` answers
    ``fleet``, ``POST /api/v1/tools/{tool}/trial`` answers ``trial`` (status, body, Date)."""

    def __init__(self) -> None:
        self.fleet: dict[str, Any] = {"version": 1, "tools": {}}
        self.trial: tuple[int, dict[str, Any], datetime] = (500, {}, datetime.now(UTC))
        self.trial_requests: list[tuple[str, dict[str, Any]]] = []
        server = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                self.answer_at(200, server.fleet, datetime.now(UTC))

            def do_POST(self) -> None:
                server.trial_requests.append((self.path, self.read_json()))
                self.answer_at(*server.trial)

            def answer_at(self, status: int, body: dict[str, Any], date: datetime) -> None:
                self.answer(status, body, {"Date": format_datetime(date, usegmt=True)})

        super().__init__(Handler)

    def half_open(self, tool: str, trial: str = "lease") -> None:
        self.fleet = {
            "version": self.fleet["version"] + 1,
            "tools": {tool: {"state": "half_open", "since": SINCE, "reason": "", "trial": trial}},
        }


@pytest.fixture
def trial_server() -> Iterator[TrialServer]:
    server = TrialServer()
    yield server
    server.close()


@pytest.fixture
def plane(trial_server: TrialServer, clock: FakeClock) -> Iterator[ControlPlane]:
    plane = ControlPlane(
        trial_server.url,
        token="bp_test",
        worker_id="w 1/a",
        config=PlaneConfig(timeout=2),
        clock=clock,
        start=False,
    )
    yield plane
    plane.close(timeout=0)


def poll(plane: ControlPlane) -> None:
    """What the poll thread does on each round, on the test's thread."""
    assert plane.fleet_sync.poll()
    plane._ask_for_trials()


def offered_before(plane: ControlPlane, tools: list[dict[str, Any]] = TOOLS) -> None:
    """A poll brought the fleet's state, and a run of this worker offered its tools (and lost
    the half-open one: no lease yet). Only then does this worker want the tool's trial."""
    assert plane.fleet_sync.poll()
    plane.start_run(agent="earlier").available(tools)


GRANT_DATE = datetime(2026, 11, 29, 9, 0, 0, tzinfo=UTC)


def granted(seconds: float = 120) -> tuple[int, dict[str, Any], datetime]:
    expires = (GRANT_DATE + timedelta(seconds=seconds)).isoformat()
    return 200, {"granted": True, "window": 2, "expires_at": expires}, GRANT_DATE


def test_the_client_asks_for_the_lease_and_a_run_gets_the_tool(
    trial_server: TrialServer, plane: ControlPlane, clock: FakeClock
) -> None:
    trial_server.half_open("web search/v2")
    trial_server.trial = granted(120)
    tools = chat_tools("web search/v2", "calculator")
    offered_before(plane, tools)
    run = plane.start_run(agent="research")
    poll(plane)
    [(path, body)] = trial_server.trial_requests
    assert path == "/api/v1/tools/web%20search%2Fv2/trial"
    assert body == {"worker_id": "w 1/a"}
    lease = plane.fleet.trials()["web search/v2"]
    # Measured against the server's Date, less the header's one-second resolution.
    assert (lease.window, lease.expires_at) == (2, clock() + 119)
    assert [tool_name(t) for t in run.available(tools)] == ["web search/v2", "calculator"]
    poll(plane)
    assert len(trial_server.trial_requests) == 1  # held: not asked again
    assert plane.stats.trials_granted == 1


def test_the_lease_is_measured_on_the_servers_clock_not_this_hosts(
    trial_server: TrialServer, plane: ControlPlane, clock: FakeClock
) -> None:
    trial_server.half_open("web_search")
    # GRANT_DATE, the server's Date, is far from this host's clock: only what is left counts.
    trial_server.trial = granted(30)
    offered_before(plane)
    run = plane.start_run(agent="research")
    poll(plane)
    assert plane.fleet.trials()["web_search"].expires_at == clock() + 29
    assert run.available(TOOLS) == TOOLS


def test_a_refusal_is_asked_again_after_the_retry_interval(
    trial_server: TrialServer, plane: ControlPlane, clock: FakeClock
) -> None:
    trial_server.half_open("web_search")
    trial_server.trial = (200, {"granted": False, "window": 2, "expires_at": None}, GRANT_DATE)
    offered_before(plane)
    run = plane.start_run(agent="research")
    poll(plane)
    poll(plane)
    assert len(trial_server.trial_requests) == 1
    assert offered(run.breakers) == ["calculator"]
    clock.advance(plane.fleet_sync.trial_retry_interval)
    trial_server.trial = granted()
    poll(plane)
    assert len(trial_server.trial_requests) == 2
    assert "web_search" in plane.fleet.trials()


@pytest.mark.parametrize(
    "answer",
    [
        (503, {"detail": "the fleet store (Redis) is unavailable"}, GRANT_DATE),
        (200, {"granted": True, "window": 2, "expires_at": None}, GRANT_DATE),
        (200, {"granted": True, "window": 2, "expires_at": "tomorrow"}, GRANT_DATE),
        (200, {"granted": True, "window": 2, "expires_at": GRANT_DATE.isoformat()}, GRANT_DATE),
    ],
    ids=["503", "no-expiry", "bad-expiry", "already-expired"],
)
def test_a_failed_request_is_logged_and_asked_again_on_the_next_poll(
    trial_server: TrialServer,
    plane: ControlPlane,
    answer: tuple[int, dict[str, Any], datetime],
    caplog: pytest.LogCaptureFixture,
) -> None:
    trial_server.half_open("web_search")
    trial_server.trial = answer
    offered_before(plane)
    run = plane.start_run(agent="research")
    with caplog.at_level(logging.WARNING, logger="breaker_panel.client"):
        poll(plane)
    assert "trial lease for web_search not obtained" in caplog.text
    assert plane.fleet.trials() == {}
    assert offered(run.breakers) == ["calculator"]
    poll(plane)
    assert len(trial_server.trial_requests) == 2


def test_an_unreachable_control_plane_never_raises(clock: FakeClock) -> None:
    plane = ControlPlane("http://127.0.0.1:9", token="t", worker_id="w", clock=clock, start=False)
    run = plane.start_run(agent="research")
    tools = {"web_search": {"state": "half_open", "trial": "lease"}}
    plane.update_fleet({"version": 1, "tools": tools})
    offered(plane.start_run(agent="earlier").breakers)  # this worker's runs offer the tool
    plane._ask_for_trials()
    assert plane.stats.trial_requests == 1 and plane.fleet.trials() == {}
    assert offered(run.breakers) == ["calculator"]


def test_a_worker_asks_only_for_the_trials_of_tools_its_runs_offer(
    trial_server: TrialServer, plane: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    # Another agent's tool is half-open too; this worker's runs only ever offered calculator
    # and web_search. Its lease is never asked for, and its name is never logged.
    half_open = {"state": "half_open", "since": SINCE, "reason": "", "trial": "lease"}
    tools = {"web_search": half_open, "crm_lookup": half_open}
    trial_server.fleet = {"version": 2, "tools": tools}
    trial_server.trial = (503, {"detail": "the fleet store (Redis) is unavailable"}, GRANT_DATE)
    offered_before(plane)
    run = plane.start_run(agent="research")
    with caplog.at_level(logging.DEBUG, logger="breaker_panel"):
        poll(plane)
        poll(plane)
    assert [path for path, _ in trial_server.trial_requests] == [
        "/api/v1/tools/web_search/trial"
    ] * 2
    assert "crm_lookup" not in caplog.text
    assert offered(run.breakers) == ["calculator"]


def test_a_worker_whose_runs_never_offered_the_tool_never_asks(
    trial_server: TrialServer, plane: ControlPlane
) -> None:
    trial_server.half_open("crm_lookup")
    trial_server.trial = granted()
    run = plane.start_run(agent="calculator-only")
    poll(plane)
    assert run.available(chat_tools("calculator")) == chat_tools("calculator")
    poll(plane)
    assert trial_server.trial_requests == []
    assert plane.fleet.trials() == {}


def test_an_offer_counts_for_offer_memory_seconds(fleet: ExternalScope, clock: FakeClock) -> None:
    fleet.update({"web_search": ScopeState(State.OPEN, "5 failures from 2 workers")})
    fleet.note_offered("web_search")  # offered while open: wanted when it is half-open
    clock.advance(fleet.offer_memory)
    fleet.update({"web_search": HALF_OPEN})
    assert fleet.trials_to_request() == [("web_search", HALF_OPEN)]
    clock.advance(1)
    assert fleet.trials_to_request() == []


# A poll thread that would sleep ten minutes between polls (the scripted server never holds a
# poll): only a nudge makes it ask sooner.
SLEEPY = PlaneConfig(timeout=2, fleet_poll_interval=600)


def test_a_run_offering_a_half_open_tool_gets_its_lease_asked_for_at_once(
    trial_server: TrialServer,
) -> None:
    trial_server.half_open("web_search")
    trial_server.trial = granted()
    plane = ControlPlane(trial_server.url, token="bp_test", worker_id="w-1", config=SLEEPY)
    try:
        wait_for(lambda: "web_search" in plane.fleet.snapshot(), "the first poll")
        first = plane.start_run(agent="research")
        assert offered(first.breakers) == ["calculator"]  # no lease yet: removed for this run
        wait_for(lambda: "web_search" in plane.fleet.trials(), "the lease, without a poll")
        assert offered(plane.start_run(agent="research").breakers) == ["web_search", "calculator"]
    finally:
        plane.close(timeout=1)


def test_a_run_start_can_wait_for_the_lease_and_make_the_trial_itself(
    trial_server: TrialServer,
) -> None:
    trial_server.fleet = {"version": 2, "tools": {"web_search": {"state": "open"}}}
    trial_server.trial = granted()
    plane = ControlPlane(trial_server.url, token="bp_test", worker_id="w-1", config=SLEEPY)
    try:
        wait_for(lambda: "web_search" in plane.fleet.snapshot(), "the first poll")
        with plane.start_run(agent="research") as earlier:
            assert offered(earlier.breakers) == ["calculator"]  # open: this worker offers it
        # The fleet goes half-open (here told by an ingest reply): nobody asks while idle.
        trial_server.half_open("web_search")
        plane.update_fleet(trial_server.fleet)
        assert trial_server.trial_requests == []
        run = plane.start_run(agent="research", trial_wait=MAX_TRIAL_WAIT)
        assert len(trial_server.trial_requests) == 1  # asked as the run started
        assert run.available(TOOLS) == TOOLS  # and this very run makes the trial
        assert run.breakers.holds_fleet_trial("web_search")
    finally:
        plane.close(timeout=1)


def test_no_request_without_a_run_in_progress(
    trial_server: TrialServer, plane: ControlPlane
) -> None:
    trial_server.half_open("web_search")
    trial_server.trial = granted()
    run = plane.start_run(agent="research")
    run.finish()
    poll(plane)
    assert trial_server.trial_requests == []


def test_a_short_run_over_before_the_poll_thread_wakes_still_gets_the_lease_asked_for(
    trial_server: TrialServer, plane: ControlPlane
) -> None:
    # The demo's runs: start, offer the tools, finish, all in microseconds; the poll thread's
    # round comes after the run is over. The round the start asked for is still owed.
    trial_server.fleet = {"version": 2, "tools": {"web_search": {"state": "open"}}}
    assert plane.fleet_sync.poll()
    with plane.start_run(agent="earlier") as earlier:
        earlier.available(TOOLS)  # offered while open: this worker wants the tool's trial
    trial_server.half_open("web_search")
    trial_server.trial = granted()
    assert plane.fleet_sync.poll()
    with plane.start_run(agent="research") as short:
        assert offered(short.breakers) == ["calculator"]  # no lease yet
    assert not plane.runs_in_progress
    plane._ask_for_trials()
    assert len(trial_server.trial_requests) == 1
    assert offered(plane.start_run(agent="research").breakers) == ["web_search", "calculator"]


def test_an_owed_request_is_made_once(trial_server: TrialServer, plane: ControlPlane) -> None:
    trial_server.fleet = {"version": 2, "tools": {"web_search": {"state": "open"}}}
    assert plane.fleet_sync.poll()
    with plane.start_run(agent="earlier") as earlier:
        earlier.available(TOOLS)  # offered while open: this worker wants the tool's trial
    trial_server.half_open("web_search")
    trial_server.trial = (200, {"granted": False}, GRANT_DATE)
    assert plane.fleet_sync.poll()
    plane.start_run(agent="research").finish()
    plane._ask_for_trials()
    plane.fleet.refuse_trial("web_search", plane.fleet.snapshot()["web_search"], retry_at=0)
    plane._ask_for_trials()  # no run in progress and nothing owed: an idle worker never asks
    assert len(trial_server.trial_requests) == 1


def test_the_same_window_read_differently_keeps_a_trial_already_made(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    # A reply from the database's view (Redis away) has no `trial`, another a new reason: the
    # window (named by `since`) is the same, so the trial made in it is not forgotten, and the
    # worker does not ask for (and get) a second one.
    half_open_with_lease(fleet, clock)
    holder = start(worker, fleet)
    assert "web_search" in offered(holder)
    holder.record_success("web_search")  # the trial call; its event is still on its way
    for reread in (replace(HALF_OPEN, trial=""), replace(HALF_OPEN, reason="cooldown elapsed")):
        fleet.update({"web_search": reread})
        assert fleet.trials_to_request() == []
    fleet.update({"web_search": HALF_OPEN})
    assert fleet.trials_to_request() == []
    assert not start(worker, fleet).holds_fleet_trial("web_search")


def test_a_window_whose_trial_was_made_never_gets_a_second_one(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    # Under load a late answer can bring back a window already decided here (the trial failed,
    # its event not yet applied): the server would grant its live lease to this worker again.
    half_open_with_lease(fleet, clock)
    holder = start(worker, fleet)
    assert "web_search" in offered(holder)
    holder.record_failure("web_search", DOWN)
    fleet.update({"web_search": ScopeState(State.OPEN, "trial 1 failed")})
    fleet.update({"web_search": HALF_OPEN})  # the late answer
    assert fleet.trials_to_request() == []
    assert not fleet.grant_trial("web_search", HALF_OPEN, window=3, expires_at=clock() + 60)
    assert offered(start(worker, fleet)) == ["calculator"]
    # The next window is a new one.
    fleet.update({"web_search": replace(HALF_OPEN, since="2026-11-29T09:13:04.000Z")})
    assert [name for name, _ in fleet.trials_to_request()] == ["web_search"]


def test_a_grant_for_a_window_whose_trial_was_made_is_not_taken_again(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    # Seen in the 64-worker benchmark: the lease was asked for while this worker still saw the
    # last window; the control plane granted it for its current one (window 3), and the trial
    # was made there. The next answer shows that window; asking again, this worker is granted
    # its own live lease once more: it must not make a second trial call in window 3.
    half_open_with_lease(fleet, clock)  # granted as window 3, asked for with HALF_OPEN's since
    holder = start(worker, fleet)
    assert "web_search" in offered(holder)
    holder.record_failure("web_search", DOWN)
    current = replace(HALF_OPEN, since="2026-11-29T09:12:05.500Z")
    fleet.update({"web_search": current})
    assert [name for name, _ in fleet.trials_to_request()] == ["web_search"]
    assert not fleet.grant_trial("web_search", current, window=3, expires_at=clock() + 60)
    assert fleet.trials_to_request() == []  # refused until this worker sees a new window
    assert offered(start(worker, fleet)) == ["calculator"]
    after = replace(HALF_OPEN, since="2026-11-29T09:12:09.000Z")
    fleet.update({"web_search": after})
    assert fleet.grant_trial("web_search", after, window=4, expires_at=clock() + 60)
    assert offered(start(worker, fleet)) == ["web_search", "calculator"]


def test_no_request_for_a_probe_or_without_fleet_scope(
    trial_server: TrialServer, clock: FakeClock
) -> None:
    trial_server.trial = granted()
    trial_server.half_open("web_search", trial="probe")
    with_fleet = ControlPlane(trial_server.url, token="t", worker_id="w", clock=clock, start=False)
    probing = with_fleet.start_run(agent="research")
    poll(with_fleet)
    trial_server.half_open("web_search")
    without = ControlPlane(
        trial_server.url,
        token="t",
        worker_id="w",
        config=PlaneConfig(scopes=["run", "worker"]),
        start=False,
    )
    unaware = without.start_run(agent="research")
    poll(without)
    assert trial_server.trial_requests == []
    assert offered(probing.breakers) == ["calculator"]
    assert offered(unaware.breakers) == ["web_search", "calculator"]


def test_a_run_dropped_without_finish_stops_counting_as_in_progress(
    trial_server: TrialServer, plane: ControlPlane
) -> None:
    trial_server.half_open("web_search")
    trial_server.trial = granted()
    plane.start_run(agent="research")  # never finished, nobody holds it
    gc.collect()
    poll(plane)
    assert trial_server.trial_requests == []


def test_a_grant_is_read_against_the_date_header_or_else_this_hosts_clock() -> None:
    headers = {"date": format_datetime(GRANT_DATE, usegmt=True)}
    refused = {"granted": False, "window": 4, "expires_at": None}
    assert read_grant(200, headers, refused) is None
    assert read_grant(200, headers, granted(60)[1]) == (2, 59.0)
    in_a_minute = (datetime.now(UTC) + timedelta(seconds=60)).isoformat()
    grant = read_grant(200, {}, {"granted": True, "window": 5, "expires_at": in_a_minute})
    assert grant is not None and grant[0] == 5 and 57 < grant[1] <= 59


# -- marking the trial call ---------------------------------------------------------------------


def test_only_the_holders_next_call_is_the_trial_call(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    half_open_with_lease(fleet, clock)
    holder, other = start(worker, fleet), start(worker, fleet)
    assert not holder.holds_fleet_trial("web_search")  # not claimed before it asks
    offered(holder), offered(other)
    assert holder.holds_fleet_trial("web_search")
    assert not other.holds_fleet_trial("web_search")
    assert not holder.holds_fleet_trial("calculator")
    holder.record_failure("web_search", BAD_ARGS)  # no verdict: the next call is the trial
    assert holder.holds_fleet_trial("web_search")
    holder.record_success("web_search")
    assert not holder.holds_fleet_trial("web_search")  # passed: later calls are ordinary ones
    assert "web_search" in offered(holder)


def test_a_new_last_error_in_the_same_window_keeps_the_lease(
    worker: WorkerBreakers, fleet: ExternalScope, clock: FakeClock
) -> None:
    half_open_with_lease(fleet, clock)
    holder = start(worker, fleet)
    assert "web_search" in offered(holder)
    fleet.update({"web_search": replace(HALF_OPEN, last_error="late 503 from worker 2")})
    assert "web_search" in offered(holder)
    assert holder.holds_fleet_trial("web_search")
    fleet.update({"web_search": replace(HALF_OPEN, since="a new window")})
    assert not holder.holds_fleet_trial("web_search")


def tool_calls(plane: ControlPlane) -> list[tuple[str, str, bool | None]]:
    """(run id, outcome, the event's `trial` field or None when left out) of each tool.call."""
    return [
        (event["run_id"], event["outcome"], event.get("trial"))
        for event in plane.buffered()
        if event["type"] == "tool.call"
    ]


def test_the_trial_call_is_reported_with_trial_true(
    trial_server: TrialServer, plane: ControlPlane
) -> None:
    trial_server.half_open("web_search")
    trial_server.trial = granted()
    offered_before(plane)
    holder, other = plane.start_run(agent="research"), plane.start_run(agent="research")
    poll(plane)
    assert holder.available(TOOLS) == TOOLS
    assert other.available(TOOLS) == TOOLS[1:]
    other.record_failure("web_search", DOWN)  # a late result: not the trial
    holder.record_success("calculator")
    holder.record_failure("web_search", BAD_ARGS)  # the trial call, without a verdict
    holder.record_failure("web_search", DOWN)  # the trial call again: it failed
    holder.record_failure("web_search", DOWN)  # after the trial
    assert tool_calls(plane) == [
        (other.run_id, "retryable", None),
        (holder.run_id, "success", None),
        (holder.run_id, "semantic", True),
        (holder.run_id, "retryable", True),
        (holder.run_id, "retryable", None),
    ]


def test_a_successful_trial_is_marked_and_the_calls_after_it_are_not(
    trial_server: TrialServer, plane: ControlPlane
) -> None:
    trial_server.half_open("web_search")
    trial_server.trial = granted()
    offered_before(plane)
    holder = plane.start_run(agent="research")
    poll(plane)
    assert holder.available(TOOLS) == TOOLS
    holder.record_success("web_search")
    holder.record_success("web_search")
    assert tool_calls(plane) == [
        (holder.run_id, "success", True),
        (holder.run_id, "success", None),
    ]


def test_the_fleet_entrys_last_error_is_read_but_kept_out_of_the_notice(
    trial_server: TrialServer, plane: ControlPlane
) -> None:
    entry = {"state": "open", "reason": "5 failures from 2 workers", "last_error": "timeout"}
    trial_server.fleet = {"version": 2, "tools": {"web_search": entry}}
    run = plane.start_run(agent="research")
    poll(plane)
    assert plane.fleet.snapshot()["web_search"].last_error == "timeout"
    run.available(TOOLS)
    # Another agent's error text is not this run's to read: the notice says it in its own words.
    text = run.notice() or ""
    assert "- web_search: failing for other agents right now" in text
    assert "timeout" not in text and "workers" not in text


def test_a_run_that_failed_before_the_fleet_opened_names_its_own_error(
    trial_server: TrialServer, plane: ControlPlane
) -> None:
    run = plane.start_run(agent="research")
    run.record_failure("web_search", ToolFailure("503 from vendor"))
    trial_server.fleet = {"version": 2, "tools": {"web_search": {"state": "open"}}}
    poll(plane)
    assert run.available(TOOLS) == TOOLS[1:]
    assert "last error: 503 from vendor" in (run.notice() or "")
