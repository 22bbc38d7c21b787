"""Replay the outage through the real SDK and the real HTTP ingest of a running control plane.

Every run is a thread driving ``ResearchScript`` through a real ``breaker_panel`` ``Run`` of one
of ``scenario.workers`` ``ControlPlane`` clients. Simulated seconds are divided by ``speed``:
sleeps are real, so the control plane sees events arrive as they would, only sooner. Figures
returned here are in simulated seconds (real seconds x ``speed``).

What each mode changes is only what the agent does with the breaker. The scripted model reads
what it is sent (the tools array and the notice), so a tool that stays in the array reaches the
vendor, and a removal that does not happen shows in the figures.

- ``none``: no breaker at all; every failure goes back to the model.
- ``fail-fast``: exactly ``fleet`` mode's breaker (fleet scope), used as a plain breaker: a call
  is refused in microseconds (outcome ``blocked``) while the tool stays in the tools array and no
  notice is sent, so the model keeps asking for it. Same detection, no removal: the difference
  between this mode and ``fleet`` is what removing the tool is worth.
- ``run`` / ``worker`` / ``fleet``: the breaker at that scope removes the tool from the tools
  array and the run's notice says why.
"""

from __future__ import annotations

import logging
import math
import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from breaker_panel import ControlPlane, PlaneConfig, ToolFailure
from runs.simulation.scenario import Scenario
from runs.simulation.script import READ, SEARCH, Action, ResearchScript

logger = logging.getLogger(__name__)

__all__ = (
    "AGENTS",
    "ModeResult",
    "RunPlayer",
    "RunRecord",
    "Stage",
    "replay_mode",
    "what_it_met",
)

AGENT = "research"
MODEL = "scripted-research-model"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": SEARCH,
            "description": "Search the web.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": READ,
            "description": "Read a web page.",
            "parameters": {"type": "object", "properties": {"url": {"type": "string"}}},
        },
    },
]
BOTH = frozenset({SEARCH, READ})
# Undelivered events per agent worker above which the replay's clock waits for the control
# plane (about two flushes' worth at 60x), and below which it runs again.
BACKLOG_HIGH = 40
BACKLOG_LOW = 10
# The story assumes a control plane that answers a batch within this many simulated seconds
# (one flush); while one takes longer, the replay's clock waits for it.
ANSWER_WITHIN_SIM_S = 5.0
# The wrap-up step counts the pages show spend for (re-priced from one replay's runs).
WRAP_UP_SENSITIVITY = (1, 2, 5)
# Who plays the runs: the agent written by hand below, or the same scripted model driven through
# Pydantic AI and the SDK's integration (runs/simulation/pydantic_ai_agent.py).
AGENTS = ("hand-written", "pydantic-ai")
SCOPES_BY_MODE: dict[str, tuple[str, ...]] = {
    "none": (),
    "fail-fast": ("fleet",),
    "run": ("run",),
    "worker": ("worker",),
    "fleet": ("fleet",),
}


@dataclass
class RunRecord:
    """What one run did, in simulated seconds."""

    started_s: float
    ended_s: float = 0.0
    spend: Decimal = Decimal(0)
    model_calls: int = 0
    search_calls: int = 0  # calls that reached the vendor
    search_calls_failing: int = 0  # ... while it was down
    http_attempts: int = 0
    refused: int = 0  # refused by a fail-fast breaker
    degraded: bool = False
    wrap_up_started_at: int | None = None  # the step at which the model stopped asking for search
    met: str = "healthy tool"  # healthy tool | failed through | refused fast | tool removed

    @property
    def duration_s(self) -> float:
        return self.ended_s - self.started_s


@dataclass
class ModeResult:
    mode: str
    runs: list[RunRecord] = field(default_factory=list)
    recovery_lag_s: float | None = None  # vendor back -> web_search offered and working again
    events_dropped: int = 0
    paused_s: float = 0.0  # real seconds the clock was stopped, for whichever reason
    waited_for_runs_s: float = 0.0  # real seconds it waited for runs that were due
    pauses: int = 0
    wall_times: dict[str, datetime] = field(default_factory=dict)  # outage_start, outage_end
    # When the clock stood still, (from, to) in Unix seconds: the runs' timestamps include it.
    paused_spans: list[tuple[float, float]] = field(default_factory=list)

    def in_window(self, scenario: Scenario) -> list[RunRecord]:
        return [
            r for r in self.runs if scenario.outage_start_s <= r.started_s < scenario.outage_end_s
        ]

    def summary(self, scenario: Scenario) -> dict[str, Any]:
        """The figures for the comparison table, over the runs started during the outage."""
        window = self.in_window(scenario)
        durations = sorted(r.duration_s for r in window)
        return {
            "mode": self.mode,
            "runs": len(window),
            "model_calls": sum(r.model_calls for r in window),
            "model_spend_usd": float(sum((r.spend for r in window), Decimal(0))),
            "mean_run_duration_s": statistics.fmean(durations) if durations else 0.0,
            "p95_run_duration_s": _percentile(durations, 0.95),
            # Calls sent at the vendor while it was down (any run): the story's ~3,700.
            "web_search_calls": sum(r.search_calls_failing for r in self.runs),
            "web_search_calls_total": sum(r.search_calls for r in self.runs),
            "http_attempts": sum(r.http_attempts for r in self.runs),
            "degraded_runs": sum(r.degraded for r in window),
            "recovery_lag_s": self.recovery_lag_s,
            "events_dropped": self.events_dropped,
            "paused_real_s": round(self.paused_s, 2),
            "waited_for_runs_real_s": round(self.waited_for_runs_s, 2),
            "pauses": self.pauses,
            "wrap_up_steps": scenario.wrap_up_steps,
            "runs_wrapped_up": sum(r.wrap_up_started_at is not None for r in window),
            # The same runs re-priced as if the model took N steps to finish without the tool.
            "spend_by_wrap_up_steps": {
                str(n): float(sum((_repriced(r, scenario, n) for r in window), Decimal(0)))
                for n in WRAP_UP_SENSITIVITY
            },
            # The least these runs could cost had every one lost the tool at its first step.
            "floor_spend_by_wrap_up_steps": {
                str(n): float(scenario.run_cost(min(scenario.step_budget, n)) * len(window))
                for n in WRAP_UP_SENSITIVITY
            },
        }


def _repriced(record: RunRecord, scenario: Scenario, wrap_up_steps: int) -> Decimal:
    """A run's spend had its model needed ``wrap_up_steps`` calls to finish without the tool."""
    if record.wrap_up_started_at is None:
        return record.spend
    steps = min(scenario.step_budget, record.wrap_up_started_at + wrap_up_steps - 1)
    return scenario.run_cost(steps)


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))
    return sorted_values[index]


# Who may hold the replay's clock stopped: the control plane falling behind (``_Governor``) and
# a run that is due but has not got to run yet (``_SimClock`` itself).
CONTROL_PLANE = "control plane"
RUNS = "runs"
# A due run holding the clock longer than this (real seconds) is taken to be stuck, not busy:
# the clock stops waiting for it until it sleeps on the clock again.
RUN_HOLD_LIMIT_S = 10.0
# Simulated seconds within which a reading is the moment a run is due (float round trips).
_SAME_MOMENT_S = 1e-6
_MIN_NAP_S = 0.0002


class _SimClock:
    """Simulated seconds since the replay began: real elapsed time x speed, minus pauses.

    The clock never runs past a run that is due: each thread that sleeps on it is at the moment
    it last asked to wake, and until it asks again (or ``leave``s) the clock holds there, however
    long the thread waited for the GIL or a core (docs/adr/0157-the-replay-s-clock-never-runs.md).
    It also stops while the control plane is behind (``pause()``/``resume()``, ``_Governor``).
    ``_pauses`` and ``paused_s`` are the stops, overlapping holds merged; ``held_s`` is each
    reason's own total.
    """

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self.origin = time.monotonic()
        self.wall_origin = time.time() - (time.monotonic() - self.origin)
        # (stopped since, real seconds stopped before), replaced whole so that ``now`` reads a
        # consistent pair without the lock.
        self._state: tuple[float | None, float] = (None, 0.0)
        self._pauses: list[tuple[float, float]] = []  # (paused at, resumed at), monotonic
        self._holders: dict[str, float] = {}  # reason -> held since (monotonic)
        self.held_s: dict[str, float] = {}  # real seconds each reason held the clock
        self._resumed = threading.Condition()
        # Simulated moment each thread that sleeps on the clock is at, and the earliest of them.
        self._at: dict[int, float] = {}
        self._floor = math.inf
        self._held_at = 0.0  # the moment the clock is held at for runs

    @property
    def paused_s(self) -> float:
        """Real seconds the clock has been stopped, the current stop not included."""
        return self._state[1]

    @property
    def _paused_at(self) -> float | None:
        return self._state[0]

    def wall_time_of(self, sim_s: float) -> datetime:
        """When (wall clock) the replay's clock showed ``sim_s``, pauses included; for a
        moment already passed."""
        real = sim_s / self.speed  # running seconds since the origin
        # A stop that began at ``sim_s`` itself (a hold for the runs due then) counts as after
        # it, whatever the last bit of the float sums says: else the moment maps to the stop's
        # end, and the runs started during it fall on the wrong side of an outage boundary.
        same = _SAME_MOMENT_S / self.speed
        at = self.origin
        for paused, resumed in self._pauses:
            if paused - at >= real - same:
                break
            real -= paused - at
            at = resumed
        return datetime.fromtimestamp(self.wall_of(at + real), UTC)

    def wall_of(self, monotonic_s: float) -> float:
        """The Unix time of a moment of ``time.monotonic``."""
        return self.wall_origin + (monotonic_s - self.origin)

    def now(self) -> float:
        paused_at, paused_s = self._state
        real = (time.monotonic() if paused_at is None else paused_at) - self.origin
        sim = (real - paused_s) * self.speed
        if sim < self._floor - _SAME_MOMENT_S:
            return sim
        with self._resumed:
            return self._catch_up()

    def _catch_up(self) -> float:
        """The clock's reading; once it has reached a run that is due, it has been held there
        since that moment (nobody read a later time), until every run due then sleeps again or
        leaves. Called with the lock held."""
        floor = self._floor
        paused_at, paused_s = self._state
        real = (time.monotonic() if paused_at is None else paused_at) - self.origin
        if (sim := (real - paused_s) * self.speed) < floor - _SAME_MOMENT_S:
            return sim
        since = self._holders.get(RUNS)
        if since is None:
            since = self.origin + paused_s + floor / self.speed
            self._holders[RUNS] = since
            self._held_at = floor
            self._state = (since if paused_at is None else min(paused_at, since), paused_s)
        elif time.monotonic() - since > RUN_HOLD_LIMIT_S:
            stuck = [thread for thread, at in self._at.items() if at <= floor]
            logger.warning("the replay's clock stops waiting for %d stuck run(s)", len(stuck))
            for thread in stuck:
                del self._at[thread]
            self._moved_on()
            return self._catch_up()
        return floor

    def _moved_on(self) -> None:
        """A thread moved its moment on or left: the clock may run up to the next earliest one.
        Called with the lock held."""
        self._floor = min(self._at.values(), default=math.inf)
        if RUNS in self._holders and self._floor > self._held_at:
            self._release(RUNS)

    def sleep(self, sim_seconds: float) -> None:
        self.sleep_until(self.now() + sim_seconds)

    def sleep_until(self, sim_at: float) -> None:
        thread = threading.get_ident()
        with self._resumed:
            before = self._at.get(thread)
            # A moment already passed (a thread that started late) holds nothing back.
            at = self._at[thread] = max(sim_at, self._catch_up())
            if before is not None and before <= self._floor:
                self._moved_on()
            elif at < self._floor:
                self._floor = at
        while (left := sim_at - self.now()) > 0:
            if self._stopped_for_more_than_runs():
                with self._resumed:
                    self._resumed.wait_for(
                        lambda: not self._stopped_for_more_than_runs(), timeout=1.0
                    )
            else:
                # Held for runs, it runs again within milliseconds: a nap, not a wake-up of
                # every waiting thread at each release.
                time.sleep(max(left / self.speed, _MIN_NAP_S))

    def _stopped_for_more_than_runs(self) -> bool:
        return len(self._holders) > (RUNS in self._holders)

    def leave(self) -> None:
        """This thread sleeps on the clock no more (its run ended): the clock stops waiting
        for it."""
        with self._resumed:
            if self._at.pop(threading.get_ident(), None) is not None:
                self._moved_on()

    def pause(self, reason: str = CONTROL_PLANE) -> None:
        with self._resumed:
            self._catch_up()
            if reason in self._holders:
                return
            now = time.monotonic()
            self._holders[reason] = now
            paused_at, paused_s = self._state
            if paused_at is None:
                self._state = (now, paused_s)

    def resume(self, reason: str = CONTROL_PLANE) -> None:
        with self._resumed:
            self._catch_up()
            self._release(reason)

    def _release(self, reason: str) -> None:
        since = self._holders.pop(reason, None)
        if since is None:
            return
        now = time.monotonic()
        self.held_s[reason] = self.held_s.get(reason, 0.0) + now - since
        paused_at, paused_s = self._state
        if not self._holders and paused_at is not None:
            start = paused_at
            if self._pauses and self._pauses[-1][1] >= paused_at:  # adjoining: one stop
                start = self._pauses.pop()[0]
            self._pauses.append((start, now))
            self._state = (None, paused_s + now - paused_at)
        if reason != RUNS:  # threads wait on the condition only for the other holds
            self._resumed.notify_all()


class _Governor:
    """Pauses the replay's clock while the control plane is behind the agents: a worker's batch
    unanswered for longer than ``lag_s`` (real seconds), more than ``high`` events waiting, or
    (with ``push``) a worker still without a fleet change another has heard of; resumes once
    every batch is answered, at most ``low`` events wait and every worker has the newest fleet
    state (docs/adr/0162-a-held-moment-maps-to-the.md).

    It reads the SDK sender's in-flight count and acknowledged-batch counter: a replay of the
    product, in the product's repository, may look at its own client's internals.
    """

    def __init__(
        self,
        clock: _SimClock,
        planes: list[ControlPlane],
        *,
        high: int,
        low: int,
        lag_s: float,
        push: bool = False,
    ):
        self.clock, self.planes, self.high, self.low, self.lag_s = clock, planes, high, low, lag_s
        self.push = push
        self.pauses = 0
        self._since: dict[int, tuple[int, float]] = {}  # plane -> (acknowledged, in flight since)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replay-governor", daemon=True)

    def __enter__(self) -> _Governor:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.clock.resume()

    def _oldest_unanswered(self, now: float) -> float:
        """Real seconds the oldest unanswered batch of any worker has been in flight."""
        oldest = 0.0
        for index, plane in enumerate(self.planes):
            acknowledged = plane.stats.sent_batches
            if not plane._in_flight:
                self._since.pop(index, None)
                continue
            seen = self._since.get(index)
            if seen is None or seen[0] != acknowledged:
                self._since[index] = seen = (acknowledged, now)
            oldest = max(oldest, now - seen[1])
        return oldest

    def _unheard(self) -> bool:
        """A worker has not yet got a fleet change that another has (from its ingest reply or
        its long-poll): pushed in real milliseconds, which at 60x are simulated seconds."""
        if not self.push:
            return False
        versions = [plane.fleet_sync.version for plane in self.planes]
        return min(versions) < max(versions)

    def _run(self) -> None:
        paused = False
        while not self._stop.wait(0.005):
            now = time.monotonic()
            backlog = max(plane.pending() for plane in self.planes)
            unheard = self._unheard()
            behind = self._oldest_unanswered(now) > self.lag_s or backlog > self.high or unheard
            if not paused and behind:
                self.clock.pause()
                self.pauses += 1
                paused = True
            elif (
                paused
                and not unheard
                and not any(p._in_flight for p in self.planes)
                and backlog <= self.low
            ):
                self.clock.resume()
                paused = False


@dataclass
class _Recovery:
    """The first time, after the vendor came back, that a run could use web_search again."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    first_working_s: float | None = None

    def saw_working(self, at_s: float) -> None:
        with self.lock:
            if self.first_working_s is None or at_s < self.first_working_s:
                self.first_working_s = at_s


@dataclass(frozen=True)
class Stage:
    """What every run of one mode plays against: the story, the mode, the replay's clock."""

    scenario: Scenario
    mode: str
    clock: _SimClock
    recovery: _Recovery

    @property
    def removes(self) -> bool:
        """Whether the mode's breaker takes the tool out of the tools array (and sends a notice)."""
        return self.mode not in ("none", "fail-fast")


# Plays one run on one worker's control plane with the run's own random numbers; blocks until
# the run has finished.
RunPlayer = Callable[[Stage, ControlPlane, random.Random], RunRecord]


def play_hand_written(stage: Stage, plane: ControlPlane, rng: random.Random) -> RunRecord:
    """The hand-written agent: the SDK's ``Run`` called directly, step by step."""
    return _play_run(
        scenario=stage.scenario,
        mode=stage.mode,
        plane=plane,
        clock=stage.clock,
        rng=rng,
        recovery=stage.recovery,
    )


def replay_mode(
    *,
    scenario: Scenario,
    mode: str,
    url: str,
    token: str,
    speed: float,
    worker_prefix: str | None = None,
    on_run: Callable[[RunRecord], None] | None = None,
    fleet_push: bool = True,
    player: RunPlayer = play_hand_written,
) -> ModeResult:
    """Play one mode of the outage against the control plane at ``url``; block until done."""
    clock = _SimClock(speed)
    # Only the fleet breaker's figures depend on how fast the control plane answers: the other
    # modes decide in the agent process, so the governor leaves them alone, and their breakers'
    # cooldowns run on the replay's clock (in real-time units), stopping while it waits for runs;
    # the fleet's trial leases are the server's real time.
    governed = "fleet" in SCOPES_BY_MODE[mode]
    breaker_clock = time.monotonic if governed else (lambda: clock.now() / speed)
    planes = [
        ControlPlane(
            url,
            token=token,
            worker_id=f"{worker_prefix or f'{AGENT}-{mode}-'}worker-{i + 1}",
            config=PlaneConfig(
                scopes=SCOPES_BY_MODE[mode],
                threshold=scenario.threshold,
                # The SDK's clock is real time, so its cooldowns shrink with the replay's speed.
                cooldown=scenario.cooldown_s / speed,
                max_cooldown=scenario.max_cooldown_s / speed,
                # Report and poll about every 5 simulated seconds: at the default 1 s of real
                # time a compressed replay would hide what the agents did from the fleet for
                # minutes.
                flush_interval=max(0.05, 5.0 / speed),
                fleet_poll_interval=max(0.05, 5.0 / speed),
                trial_retry_interval=max(0.05, 5.0 / speed),
                # Long-poll (the server answers when the fleet changes), or poll only.
                fleet_wait=20.0 if fleet_push else 0.0,
                # The sender's backoff after a refused or failed batch is simulated time too.
                backoff_base=0.5 / speed,
                backoff_max=max(0.05, 30.0 / speed),
            ),
            clock=breaker_clock,
        )
        for i in range(scenario.workers)
    ]
    result = ModeResult(mode=mode)
    recovery = _Recovery()
    stage = Stage(scenario=scenario, mode=mode, clock=clock, recovery=recovery)
    lock = threading.Lock()

    def play(index: int, start_s: float) -> None:
        try:
            clock.sleep_until(start_s)
            rng = random.Random(scenario.seed + index)
            record = player(stage, planes[index % len(planes)], rng)
        finally:
            clock.leave()
        with lock:
            result.runs.append(record)
        if on_run is not None:
            on_run(record)

    threads = [
        threading.Thread(target=play, args=(i, start), name=f"replay-run-{i}", daemon=True)
        for i, start in enumerate(scenario.run_starts())
    ]

    def mark(name: str, at_s: float) -> None:
        clock.sleep_until(at_s)
        clock.leave()
        # When the clock passed at_s, not when this thread got to run: on a busy machine it
        # wakes late, and runs that started in between would fall before the outage in the
        # database (the pages) while the table, on the replay's clock, counts them in it.
        result.wall_times[name] = clock.wall_time_of(at_s)

    # When the outage really began and ended: pauses move them from started + s / speed.
    threads += [
        threading.Thread(target=mark, args=(name, at), name=f"replay-{name}", daemon=True)
        for name, at in (
            ("outage_start", scenario.outage_start_s),
            ("outage_end", scenario.outage_end_s),
        )
    ]
    lag_s = ANSWER_WITHIN_SIM_S / speed if governed else float("inf")
    high = BACKLOG_HIGH if governed else 2**62
    push = governed and fleet_push
    with _Governor(clock, planes, high=high, low=BACKLOG_LOW, lag_s=lag_s, push=push) as governor:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    result.paused_s = clock.paused_s
    result.waited_for_runs_s = clock.held_s.get(RUNS, 0.0)
    result.pauses = governor.pauses
    result.paused_spans = [(clock.wall_of(a), clock.wall_of(b)) for a, b in clock._pauses]
    for plane in planes:
        plane.close(timeout=30.0)
        result.events_dropped += plane.stats.dropped
    if recovery.first_working_s is not None:
        result.recovery_lag_s = max(0.0, recovery.first_working_s - scenario.outage_end_s)
    result.runs.sort(key=lambda r: r.started_s)
    return result


def _play_run(
    *,
    scenario: Scenario,
    mode: str,
    plane: ControlPlane,
    clock: _SimClock,
    rng: random.Random,
    recovery: _Recovery,
) -> RunRecord:
    record = RunRecord(started_s=clock.now())
    run = plane.start_run(agent=AGENT, step_budget=scenario.step_budget)
    script = ResearchScript(
        scenario.step_budget, scenario.rephrase_probability, rng, scenario.wrap_up_steps
    )
    removes = mode not in ("none", "fail-fast")
    status = "completed"
    for step in range(1, scenario.step_budget + 1):
        # What the model is sent: with removal, the SDK's tools array and notice; without it,
        # every tool and no notice (a plain breaker only refuses calls).
        sent = run.available(TOOLS) if removes else TOOLS
        offered = _names(sent)
        notice = run.notice() if removes else None
        cost = scenario.step_cost(step)
        clock.sleep(cost.duration_s)
        run.record_model_call(
            model=MODEL,
            input_tokens=cost.input_tokens,
            output_tokens=cost.output_tokens,
            cost_usd=float(cost.cost_usd),
            duration_ms=round(cost.duration_s * 1000),
        )
        record.model_calls += 1
        record.spend += cost.cost_usd
        action = script.next_action(step=step, offered=offered, notice=notice)
        if action is Action.SEARCH:
            if mode == "fail-fast" and SEARCH not in _names(run.available(TOOLS)):
                # The plain breaker refuses in microseconds; the model reads it as a failure.
                run.record_blocked(SEARCH)
                record.refused += 1
                script.search_failed()
            else:
                _search(scenario, run, clock, script, record, recovery)
        elif action is Action.READ:
            clock.sleep(scenario.read_page_s)
            run.record_success(READ, duration_ms=round(scenario.read_page_s * 1000))
            script.page_read()
        elif action is not Action.WRAP_UP:
            record.degraded = action is not Action.ANSWER
            if action is Action.GIVE_UP:
                status = "failed"
            break
    record.wrap_up_started_at = script.wrap_up_started_at
    record.ended_s = clock.now()
    record.met = what_it_met(record, removed=bool(run.removals()) and removes)
    run.finish(status=status, degraded=record.degraded, steps=record.model_calls)
    return record


def _names(tools: list[dict[str, Any]]) -> set[str]:
    return {tool["function"]["name"] for tool in tools}


def _search(
    scenario: Scenario,
    run: Any,
    clock: _SimClock,
    script: ResearchScript,
    record: RunRecord,
    recovery: _Recovery,
) -> None:
    started = clock.now()
    record.search_calls += 1
    if scenario.vendor_is_down(started):
        record.search_calls_failing += 1
        clock.sleep(scenario.failing_call_s)
        record.http_attempts += scenario.failing_attempts
        failure = ToolFailure("503 from vendor", retryable=True, attempts=scenario.failing_attempts)
        run.record_failure(SEARCH, failure, duration_ms=round(scenario.failing_call_s * 1000))
        script.search_failed()
        return
    clock.sleep(scenario.healthy_search_s)
    record.http_attempts += 1
    run.record_success(SEARCH, duration_ms=round(scenario.healthy_search_s * 1000))
    script.search_succeeded()
    if started >= scenario.outage_end_s:
        recovery.saw_working(started)


def what_it_met(record: RunRecord, *, removed: bool) -> str:
    if removed:
        return "tool removed"
    if record.refused:
        return "refused fast"
    if record.http_attempts > record.search_calls:  # some call failed after its retries
        return "failed through"
    return "healthy tool"
