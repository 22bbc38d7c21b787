"""The outage replay of one breaker mode: every run of the story on its own thread, the workers'
``ControlPlane`` clients, the clock and its governor; ``ModeResult`` holds what the runs did.
Figures are in simulated seconds (real seconds x ``speed``).
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from breaker_panel import ControlPlane, PlaneConfig
from breakers.replay.agent import AGENT, Recovery, RunPlayer, RunRecord, Stage, play_hand_written
from breakers.replay.caching import PROVIDERS, cache_summary
from breakers.replay.clock import RUNS, SimClock
from breakers.replay.governor import Governor
from breakers.replay.scenario import Scenario

__all__ = ("SCOPES_BY_MODE", "ModeResult", "replay_mode")

# Undelivered events per agent worker above which the replay's clock waits for the control
# plane (about two flushes' worth at 60x), and below which it runs again.
BACKLOG_HIGH = 40
BACKLOG_LOW = 10
# The story assumes a control plane that answers a batch within this many simulated seconds
# (one flush); while one takes longer, the replay's clock waits for it.
ANSWER_WITHIN_SIM_S = 5.0
# After the story, runs keep arriving at the tail's pace until web_search is back for the agents
# (and, given ``fleet_closed``, closed in the fleet), at most this many simulated seconds: a
# replay ends with its tool recovered or says it did not
# (docs/adr/0192-the-replay-plays-on-until-the-tool-recovers.md).
RECOVERY_LIMIT_S = 20 * 60.0
# The wrap-up step counts the pages show spend for (re-priced from one replay's runs).
WRAP_UP_SENSITIVITY = (1, 2, 5)
# Every run is a thread driving ``ResearchScript`` through a real ``breaker_panel`` ``Run`` of one
# of ``scenario.workers`` ``ControlPlane`` clients. Simulated seconds are divided by ``speed``:
# sleeps are real, so the control plane sees events arrive as they would, only sooner.
#
# What each mode changes is only what the agent does with the breaker. The scripted model reads
# what it is sent (the tools array and the notice), so a tool that stays in the array reaches the
# vendor, and a removal that does not happen shows in the figures.
#
# - ``none``: no breaker at all; every failure goes back to the model.
# - ``fail-fast``: exactly ``fleet`` mode's breaker (fleet scope), used as a plain breaker: a call
#   is refused in microseconds (outcome ``blocked``) while the tool stays in the tools array and no
#   notice is sent, so the model keeps asking for it. Same detection, no removal: the difference
#   between this mode and ``fleet`` is what removing the tool is worth.
# - ``run`` / ``worker`` / ``fleet``: the breaker at that scope removes the tool from the tools
#   array and the run's notice says why.
SCOPES_BY_MODE: dict[str, tuple[str, ...]] = {
    "none": (),
    "fail-fast": ("fleet",),
    "run": ("run",),
    "worker": ("worker",),
    "fleet": ("fleet",),
}


@dataclass
class ModeResult:
    mode: str
    way: str | None = None  # how the tool was taken away (None: ``available()``, i.e. remove)
    provider: str = "openai"  # the shape of the tools array the runs sent
    runs: list[RunRecord] = field(default_factory=list)
    recovery_lag_s: float | None = None  # vendor back -> web_search offered and working again
    events_dropped: int = 0
    paused_s: float = 0.0  # real seconds the clock was stopped, for whichever reason
    waited_for_runs_s: float = 0.0  # real seconds it waited for runs that were due
    pauses: int = 0
    wall_times: dict[str, datetime] = field(default_factory=dict)  # outage_start, outage_end
    # When the clock stood still, (from, to) in Unix seconds: the runs' timestamps include it.
    paused_spans: list[tuple[float, float]] = field(default_factory=list)
    recovery_runs: int = 0  # runs started after the story, until the tool recovered

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
            "way": self.way_played,
            "provider": self.provider,
            # Calls of web_search after the notice said it was gone (refused at once).
            "hidden_tool_calls": sum(r.hidden_calls for r in self.runs),
            # Spend and cached-input share with prompt caching on, per provider.
            "caching": self.caching(scenario),
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

    @property
    def way_played(self) -> str | None:
        """The way the mode took the tool away: none for modes that never do."""
        if SCOPES_BY_MODE.get(self.mode, ()) == () or self.mode == "fail-fast":
            return None
        return self.way or "remove"

    def caching(self, scenario: Scenario) -> dict[str, Any]:
        """``cache_summary`` per provider this play stands for: the provider it was played
        against, and the other too where the way cannot differ by shape (no way chosen)."""
        providers = list(PROVIDERS) if self.way is None else [self.provider]
        calls = [
            (scenario.outage_start_s <= r.started_s < scenario.outage_end_s, r.prompts)
            for r in self.runs
        ]
        outage = (scenario.outage_start_s, scenario.outage_end_s)
        return {
            name: cache_summary(calls, provider=PROVIDERS[name], outage=outage)
            for name in providers
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


def replay_worker_ids(*, scenario: Scenario, mode: str, prefix: str | None = None) -> list[str]:
    """The worker ids of one mode's replay workers, in order."""
    return [f"{prefix or f'{AGENT}-{mode}-'}worker-{i + 1}" for i in range(scenario.workers)]


def replay_mode(
    *,
    scenario: Scenario,
    mode: str,
    url: str,
    token: str | Sequence[str],
    speed: float,
    worker_prefix: str | None = None,
    on_run: Callable[[RunRecord], None] | None = None,
    fleet_push: bool = True,
    player: RunPlayer = play_hand_written,
    fleet_closed: Callable[[], bool] | None = None,
    way: str | None = None,
    provider: str = "openai",
) -> ModeResult:
    """Play one mode of the outage against the control plane at ``url``; block until done.

    After the story's runs, more runs start at the tail's pace until a run has used web_search
    again and ``fleet_closed()`` (when given) says the fleet breaker closed, for at most
    ``RECOVERY_LIMIT_S`` simulated seconds (``ModeResult.recovery_runs``).

    ``token`` is one agent token for every worker, or one per worker (``replay_worker_ids``
    order): with the default token quorum the fleet breaker opens only for distinct tokens.
    ``way``: how the breaker takes the tool away (None: ``available()``); ``provider``: the
    shape of the tools array the runs send, "openai" (Chat) or "anthropic"."""
    if provider not in PROVIDERS:
        raise ValueError(f"provider must be one of {list(PROVIDERS)}, got {provider!r}")
    worker_ids = replay_worker_ids(scenario=scenario, mode=mode, prefix=worker_prefix)
    tokens = [token] * len(worker_ids) if isinstance(token, str) else list(token)
    if len(tokens) != len(worker_ids):
        raise ValueError(f"{len(worker_ids)} workers need as many tokens, got {len(tokens)}")
    clock = SimClock(speed)
    # Only the fleet breaker's figures depend on how fast the control plane answers: the other
    # modes decide in the agent process, so the governor leaves them alone, and their breakers'
    # cooldowns run on the replay's clock (in real-time units), stopping while it waits for runs;
    # the fleet's trial leases are the server's real time.
    governed = "fleet" in SCOPES_BY_MODE[mode]
    breaker_clock = time.monotonic if governed else (lambda: clock.now() / speed)
    planes = [
        ControlPlane(
            url,
            token=worker_token,
            worker_id=worker_id,
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
        for worker_id, worker_token in zip(worker_ids, tokens, strict=True)
    ]
    result = ModeResult(mode=mode, way=way, provider=provider)
    recovery = Recovery()
    stage = Stage(
        scenario=scenario, mode=mode, clock=clock, recovery=recovery, way=way, provider=provider
    )
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
    try:
        with Governor(
            clock, planes, high=high, low=BACKLOG_LOW, lag_s=lag_s, push=push
        ) as governor:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

            def recovered() -> bool:
                working = recovery.first_working_s is not None
                return working and (fleet_closed is None or fleet_closed())

            result.recovery_runs = _play_until(
                recovered,
                scenario=scenario,
                clock=clock,
                play=play,
                first_index=len(threads),
            )
    except BaseException:  # Ctrl-C, SIGTERM: stop the workers' threads (long-polls) now
        for plane in planes:
            plane.close(timeout=1.0)
        raise
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


def _play_until(
    done: Callable[[], bool],
    *,
    scenario: Scenario,
    clock: SimClock,
    play: Callable[[int, float], None],
    first_index: int,
) -> int:
    """Start a run every tail interval from the story's end until ``done()``, for at most
    ``RECOVERY_LIMIT_S`` simulated seconds; wait for them; return how many started."""
    every = scenario.tail_s / max(1, scenario.tail_runs)
    at = max(scenario.total_s, clock.now())
    started: list[threading.Thread] = []
    try:
        while not done() and at < scenario.total_s + RECOVERY_LIMIT_S:
            index = first_index + len(started)
            thread = threading.Thread(
                target=play, args=(index, at), name=f"replay-run-{index}", daemon=True
            )
            thread.start()
            started.append(thread)
            at += every
            clock.sleep_until(at)
    finally:
        clock.leave()
    for thread in started:
        thread.join()
    return len(started)
