"""The outage story as rows, for the economics tests, the chart pages and the screenshots.

``make_replay_batch`` writes what one ``simulate_outage`` invocation leaves behind: an
``OutageReplay`` per mode and its runs (with the tool calls and removals that say what each run
met), at the story's shape: a 22-minute window in which mode ``none`` runs are slow and
expensive, ``fail-fast`` runs fast but as expensive, and ``fleet`` runs fast and cheap. Times are
compressed by ``speed`` the way the replay compresses them. ``make_incident_story`` writes a
22-minute incident with healthy runs before it. All rows go in with ``bulk_create``; nothing
reads a clock.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from breakers.models import Incident
from runs.models import (
    ModelCall,
    OutageReplay,
    ReportedTransition,
    Run,
    ToolCall,
    WaysReplay,
    Worker,
)
from tests.dashboard.factories import T0, make_incident, make_tool

TOOL = "web_search"
WINDOW_S = 22 * 60
BASELINE_S = 4 * 60
TAIL_S = 6 * 60
_ids = itertools.count(1)


@dataclass(frozen=True)
class Shape:
    """One run as the story tells it, in simulated seconds and dollars."""

    met: str  # healthy | failed | refused | removed
    duration_s: float
    spend_usd: float
    vendor_calls: int
    attempts: int


HEALTHY = Shape("healthy", 12.4, 0.169, 2, 2)
FAILED = Shape("failed", 408.0, 1.20, 11, 55)  # 6.8 minutes, 20 steps, ~11 failing searches
REFUSED = Shape("refused", 40.0, 1.20, 0, 0)  # the budget still runs out, in seconds
DISCOVERED = Shape("removed", 170.0, 0.26, 5, 25)  # five failures, then the tool is gone
REMOVED = Shape("removed", 5.6, 0.09, 0, 0)  # told at once: answers with what it has


def _jitter(shape: Shape, rng: random.Random) -> Shape:
    factor = rng.uniform(0.85, 1.15)
    return Shape(
        shape.met,
        shape.duration_s * factor,
        shape.spend_usd * rng.uniform(0.9, 1.1),
        shape.vendor_calls,
        shape.attempts,
    )


def window_shape(mode: str, index: int) -> Shape:
    """What the index-th run of the outage window meets in this mode."""
    if mode == "none":
        return FAILED
    if mode == "fail-fast":
        return FAILED if index < 4 else REFUSED  # each worker's breaker trips once
    if mode == "run":
        return DISCOVERED
    if mode == "worker":
        return DISCOVERED if index < 4 else REMOVED
    return DISCOVERED if index < 2 else REMOVED  # fleet: the first handful, anywhere


def make_replay_batch(
    *,
    started_at: datetime,
    speed: float = 60.0,
    modes: tuple[str, ...] = ("none", "fail-fast", "run", "worker", "fleet"),
    window_runs: int = 60,
    baseline_runs: int = 10,
    tail_runs: int = 10,
    workers: int = 4,
    label: str = "b",
    with_summary: bool = True,
    seed: int = 7,
) -> list[OutageReplay]:
    """One replay per mode, played one after another as the command does."""
    replays = []
    begin = started_at
    for mode in modes:
        replay = _make_replay(
            mode=mode,
            started_at=begin,
            speed=speed,
            counts=(baseline_runs, window_runs, tail_runs),
            workers=workers,
            prefix=f"{label}-{mode}-",
            with_summary=with_summary,
            rng=random.Random(f"{seed}-{mode}"),
        )
        replays.append(replay)
        begin = (replay.finished_at or begin) + timedelta(seconds=2)
    return replays


def _make_replay(
    *,
    mode: str,
    started_at: datetime,
    speed: float,
    counts: tuple[int, int, int],
    workers: int,
    prefix: str,
    with_summary: bool,
    rng: random.Random,
) -> OutageReplay:
    total_s = BASELINE_S + WINDOW_S + TAIL_S
    replay = OutageReplay.objects.create(
        mode=mode,
        speed=speed,
        worker_prefix=prefix,
        started_at=started_at,
        outage_started_at=started_at + timedelta(seconds=BASELINE_S / speed),
        outage_ended_at=started_at + timedelta(seconds=(BASELINE_S + WINDOW_S) / speed),
        finished_at=started_at + timedelta(seconds=(total_s + 420) / speed),
        scenario={"window_s": WINDOW_S, "baseline_s": BASELINE_S, "tail_s": TAIL_S},
    )
    pool = [
        Worker.objects.create(worker_id=f"{prefix}worker-{i + 1}", first_seen_at=started_at)
        for i in range(workers)
    ]
    baseline_runs, window_runs, tail_runs = counts
    plan: list[tuple[float, Shape, bool]] = []
    for i in range(baseline_runs):
        plan.append((BASELINE_S * i / baseline_runs, HEALTHY, False))
    for i in range(window_runs):
        plan.append((BASELINE_S + WINDOW_S * i / window_runs, window_shape(mode, i), True))
    for i in range(tail_runs):
        plan.append((BASELINE_S + WINDOW_S + TAIL_S * i / tail_runs, HEALTHY, False))
    shapes = [
        make_story_run(
            worker=pool[i % workers],
            started_at=started_at + timedelta(seconds=start_s / speed),
            shape=_jitter(shape, rng),
            speed=speed,
        )
        for i, (start_s, shape, _) in enumerate(plan)
    ]
    if with_summary:
        window = [shape for (_, _, inside), shape in zip(plan, shapes, strict=True) if inside]
        spend = sum(shape.spend_usd for shape in window)
        replay.summary = {
            "mode": mode,
            "runs": len(window),
            "model_calls": 20 * len(window),
            "model_spend_usd": spend,
            "mean_run_duration_s": sum(s.duration_s for s in window) / max(1, len(window)),
            "p95_run_duration_s": max((s.duration_s for s in window), default=0.0),
            "web_search_calls": sum(s.vendor_calls for s in shapes),
            "web_search_calls_in_window": sum(s.vendor_calls for s in window),
            "http_attempts": sum(s.attempts for s in shapes),
            "degraded_runs": sum(s.met != "healthy" for s in window),
            "recovery_lag_s": 0.0,
            "events_dropped": 0,
        }
        replay.save(update_fields=["summary"])
    return replay


def make_story_run(
    *, worker: Worker, started_at: datetime, shape: Shape, speed: float = 1.0, tool: str = TOOL
) -> Shape:
    """One finished run with the rows that say what it met (durations divided by ``speed``)."""
    n = next(_ids)
    duration_ms = round(shape.duration_s * 1000 / speed)
    run = Run.objects.create(
        run_id=f"story-{n}",
        agent="research",
        worker=worker,
        status="completed",
        degraded=shape.met != "healthy",
        steps=20 if shape.met in ("failed", "refused") else 5,
        step_budget=20,
        started_at=started_at,
        finished_at=started_at + timedelta(milliseconds=duration_ms),
        duration_ms=duration_ms,
        model_calls=20 if shape.met in ("failed", "refused") else 5,
        model_spend_usd=Decimal(f"{shape.spend_usd:.6f}"),
    )
    # One model call carries the run's spend, so the incident page's own totals agree.
    ModelCall.objects.create(
        event_id=f"story-mc-{n}",
        run=run,
        ts=started_at + timedelta(milliseconds=duration_ms // 4),
        step=1,
        model="research-model",
        cost_usd=run.model_spend_usd,
    )
    at = started_at + timedelta(milliseconds=duration_ms // 3)
    calls: list[dict[str, Any]] = []
    if shape.met == "healthy":
        calls.append({"outcome": "success", "attempts": 1})
    if shape.met in ("failed", "removed") and shape.vendor_calls:
        calls.append({"outcome": "retryable", "attempts": 5})
    if shape.met == "refused":
        calls.append({"outcome": "retryable", "attempts": 5})  # what tripped the breaker
        calls.append({"outcome": "blocked", "attempts": 0})
    ToolCall.objects.bulk_create(
        ToolCall(
            event_id=f"story-tc-{n}-{i}",
            run=run,
            worker=worker,
            ts=at,
            step=i + 1,
            tool=tool,
            duration_ms=31_000,
            **call,
        )
        for i, call in enumerate(calls)
    )
    if shape.met in ("removed", "refused"):
        # A fail-fast breaker is a worker breaker too: the SDK reports the run lost the tool,
        # although the agent kept offering it (so what the run met is the refusal).
        ReportedTransition.objects.create(
            event_id=f"story-rt-{n}",
            run=run,
            worker=worker,
            ts=at,
            scope="run" if shape.vendor_calls else "fleet",
            tool=tool,
            state="open",
            reason="5 consecutive retryable failures",
        )
    return shape


def make_incident_story(
    *, tool_name: str = "news_search", opened_at: datetime = T0 - timedelta(days=2)
) -> Incident:
    """A 22-minute incident: healthy runs in the 22 minutes before, then runs that fail through
    until the fleet breaker opens, then runs that have the tool removed."""
    tool = make_tool(tool_name)
    workers = [Worker.objects.get_or_create(worker_id=f"news-worker-{i}")[0] for i in range(1, 4)]
    rng = random.Random(11)
    closed_at = opened_at + timedelta(seconds=WINDOW_S)
    for i in range(30):
        started = opened_at - timedelta(seconds=WINDOW_S) + timedelta(seconds=44 * i)
        make_story_run(
            worker=workers[i % 3], started_at=started, shape=_jitter(HEALTHY, rng), tool=tool_name
        )
    for i in range(40):
        started = opened_at + timedelta(seconds=33 * i)
        shape = DISCOVERED if i < 3 else REMOVED
        make_story_run(
            worker=workers[i % 3], started_at=started, shape=_jitter(shape, rng), tool=tool_name
        )
    return make_incident(
        tool,
        opened_at=opened_at,
        closed_at=closed_at,
        cause={"consecutive": 5, "workers": {"news-worker-1": 3, "news-worker-2": 2}},
    )


def ways_row(
    provider: str, mode: str, way: str | None, *, spend: float, kept: float | None, **fields: Any
) -> dict[str, Any]:
    """One play of ``replay_ways`` as the command stores it."""
    row: dict[str, Any] = {
        "provider": provider,
        "mode": mode,
        "way": way,
        "runs": 340,
        "model_calls": 3400,
        "spend_usd": spend,
        "spend_uncached_usd": spend * 2.5,
        "cached_share_pre_outage": 0.8,
        "cached_share_outage": None if kept is None else 0.8 * kept,
        "cached_share_kept": kept,
        "cache_write_tokens": 1_234_567,
        "hidden_tool_calls": 0 if way in {"remove", "restrict"} else 42,
        "mean_run_duration_s": 12.5,
        "web_search_calls": 35,
        "events_dropped": 0,
        "rule": f"{provider}: a caching rule in words",
    }
    row.update(fields)
    return row


def make_ways_replay(
    *,
    started_at: datetime | None = None,
    complete: bool = True,
    providers: tuple[str, ...] = ("anthropic", "openai"),
    assumptions: list[str] | None = None,
) -> WaysReplay:
    """A recorded ``replay_ways`` invocation: every mode, the removal modes once per way. Way
    refuse is the cheapest overall but dearer than remove in fleet mode (it misses the goal
    there); restrict keeps too little of the cache at OpenAI in run mode."""
    from breakers.replay.ways_matrix import cheapest_ways

    started_at = started_at or timezone.now() - timedelta(hours=1)
    rows = []
    for provider in providers:
        for mode in ("none", "fail-fast"):
            rows.append(ways_row(provider, mode, None, spend=400.0, kept=1.0))
        for mode, remove in (("run", 150.0), ("worker", 24.0), ("fleet", 20.0)):
            rows.append(ways_row(provider, mode, "remove", spend=remove, kept=0.4))
            kept = 0.5 if provider == "openai" and mode == "run" else 0.97
            rows.append(ways_row(provider, mode, "restrict", spend=remove * 0.7, kept=kept))
            refuse = remove * 1.1 if mode == "fleet" else remove * 0.6
            rows.append(ways_row(provider, mode, "refuse", spend=refuse, kept=0.95))
            rows.append(ways_row(provider, mode, "default", spend=remove * 0.75, kept=0.93))
    planned = [[r["provider"], r["mode"], r["way"]] for r in rows]
    if not complete:
        rows = rows[:3]
    return WaysReplay.objects.create(
        started_at=started_at,
        finished_at=started_at + timedelta(minutes=35),
        speed=60.0,
        scenario={"runs_in_window": 340, "seed": 20261129},
        assumptions=assumptions
        if assumptions is not None
        else ["prompt: tools 1500 tokens each", "the model asks for a tool on 10% of its steps"],
        planned=planned,
        rows=rows,
        verdicts=cheapest_ways(rows),
        complete=complete,
        interrupted_by="" if complete else "KeyboardInterrupt",
    )
