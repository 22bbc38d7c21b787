"""One replay per breaker mode, recorded as ``OutageReplay`` rows and compared.

Before each mode the fleet breaker of ``web_search`` is reset and its cooldowns are compressed by
the replay's speed (the control plane's clock is real); afterwards the policy is put back.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import timedelta
from typing import Any

import redis
from django.conf import settings
from django.utils import timezone

from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import (
    FLEET_STORE_ERRORS,
    fleet_operator_action,
    fleet_state,
    tool_policy_update,
)
from breakers.models import POLICY_BOUNDS, FleetTransition, Incident, Tool, ToolPolicy
from breakers.observability.health import beat_heartbeat_age
from breakers.replay.agent import AGENT, AGENTS, RunPlayer, RunRecord, play_hand_written
from breakers.replay.modes import (
    RECOVERY_LIMIT_S,
    SCOPES_BY_MODE,
    ModeResult,
    replay_mode,
    replay_worker_ids,
)
from breakers.replay.result import ReplayResult
from breakers.replay.scenario import MODES, Scenario
from breakers.replay.script import SEARCH
from runs.models import AgentToken, OutageReplay

__all__ = (
    "NOT_STORY_TIME",
    "ReplayError",
    "check_control_plane",
    "replay_token",
    "server_settings",
    "server_settings_warnings",
    "simulate_modes",
)

ACTOR_REASON = "outage replay: start each breaker mode from a closed breaker"


class ReplayError(Exception):
    """The replay cannot run (the control plane is unreachable, a bad argument)."""


def check_control_plane(*, url: str, token: str, timeout: float = 5.0) -> None:
    """Fail early, with a clear message, when nobody answers at ``url``."""
    request = urllib.request.Request(
        url.rstrip("/") + "/api/v1/fleet", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(1)
    except urllib.error.HTTPError as error:
        raise ReplayError(f"the control plane at {url} answered {error.code}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        raise ReplayError(
            f"no control plane answers at {url} ({error}); start one (make demo, or "
            "`python manage.py runserver` with a Celery worker and beat) or pass --url"
        ) from None


# Every time setting of the control plane that the story's clock runs through, in real seconds at
# speed 1, and its floor: a replay at 60x divides each by 60 (``server_settings``), so a flapping
# spell, a cooldown or an alert's retry lasts as long in the story as it would in production.
# Settings that are not story time are listed in ``NOT_STORY_TIME`` with the reason; a test holds
# every ``*_SECONDS`` setting to one list or the other
# (docs/adr/0193-the-replay-scales-every-story-time-setting.md).
_SERVER_INTERVALS = {
    # The tick and the sweeps below are beat's schedule, and one Celery worker must keep up
    # with it on a busy machine: at floors of 0.1 s (tick, heartbeat, two sweeps: 32 tasks a
    # second at 60x) the demo's worker fell behind at load average 20, every tick in its queue
    # expired unrun, and fail-fast and fleet mode never saw web_search half-open. At 0.25 s the
    # tick is 15 simulated seconds at 60x (ADR 0193).
    "BREAKER_TICK_SECONDS": (1.0, 0.25),
    # The trial call's event must reach the control plane while the lease lives. That takes
    # real seconds on a busy machine however fast the story runs (and the SDK counts a lease
    # 1 s short for the HTTP Date's whole seconds): below 10 s trials kept expiring unheard.
    "BREAKER_TRIAL_LEASE_SECONDS": (120.0, 10.0),
    "BREAKER_STALE_OUTCOME_SECONDS": (2.0, 0.0),
    # The defaults of every tool without a policy (web_search's own policy is compressed too,
    # ``compressed_policy``); 0.1 s is the least a policy may hold.
    "BREAKER_COOLDOWN_SECONDS": (30.0, 0.1),
    "BREAKER_MAX_COOLDOWN_SECONDS": (300.0, 0.1),
    # Openings within this window are a flapping spell, announced once at its end: unscaled, the
    # five modes' openings made one spell and fleet mode's "Breaker open" came 9 minutes late.
    "ALERT_FLAP_WINDOW_SECONDS": (600.0, 0.5),
    # The sweep ends a flapping spell and re-sends lost alerts; a beat schedule, like the tick
    # (two tasks: alerts and Slack cards), floored for the worker's sake like the tick.
    "ALERT_SWEEP_SECONDS": (10.0, 1.0),
    # The spend rule's window (when an amount is set): the story's spend arrives 60 times
    # faster, so an unscaled window would hold an hour of story; 10 s is the least it may be.
    "BREAKER_SPEND_WINDOW_SECONDS": (600.0, 10.0),
    # The alerts' pacing and retries (against the local Slack stand-in in ``make demo``).
    "SLACK_MIN_INTERVAL_SECONDS": (1.0, 0.01),
    "SLACK_RETRY_BASE_SECONDS": (1.0, 0.05),
    "SLACK_RETRY_MAX_SECONDS": (300.0, 0.05),
}

# The ``*_SECONDS`` settings that are not the story's time, and why they keep their value.
NOT_STORY_TIME = {
    "BREAKER_DEDUPE_TTL_SECONDS": "how long a client may resend a batch: real network time",
    "CACHE_MIDDLEWARE_SECONDS": "Django's page cache, which the control plane does not use",
    "BREAKER_FLEET_WAIT_MAX_SECONDS": "a long-poll's hold: the agents ask again when it ends",
    "HEALTH_BEAT_MAX_AGE_SECONDS": "readiness of the processes, derived from the tick",
    "LOGIN_FAILURE_WINDOW_SECONDS": "people logging in, not the story",
    "REQUEST_BODY_TIMEOUT_SECONDS": "an HTTP body's arrival: real network time",
    "RETENTION_PURGE_SECONDS": "housekeeping of old rows, not the story",
    "SECURE_HSTS_SECONDS": "a browser's HTTPS memory, not the story",
    "SLACK_TIMEOUT_SECONDS": "an HTTP request's timeout: real network time",
}


def server_settings(*, speed: float) -> dict[str, str]:
    """The environment a control plane needs to keep time with a replay at ``speed``."""
    return {
        name: f"{max(floor, seconds / speed):g}"
        for name, (seconds, floor) in _SERVER_INTERVALS.items()
    }


# Not a time: every replay worker may hold one fleet long-poll on the (threaded) server.
REPLAY_SERVER_SETTINGS = {"BREAKER_FLEET_MAX_WAITERS": "64"}


def server_settings_warnings(*, speed: float) -> list[str]:
    """Intervals of this process's settings that do not match ``speed`` (the replay and its
    control plane are started from the same environment by ``make demo`` and
    ``make replay-check``; a control plane started otherwise cannot be checked from here)."""
    warnings = []
    for name, wanted in server_settings(speed=speed).items():
        have = float(getattr(settings, name))
        if not float(wanted) / 1.5 <= have <= float(wanted) * 1.5:
            warnings.append(
                f"{name} is {have:g} s here, {have * speed:g} simulated seconds at {speed:g}x; "
                f"a control plane in step with this replay has {wanted} s"
            )
    return warnings


@contextmanager
def replay_token() -> Iterator[tuple[AgentToken, str]]:
    """A token for this replay only, revoked when it ends."""
    row, raw = AgentToken.issue(name="outage-replay")
    try:
        yield row, raw
    finally:
        AgentToken.objects.filter(pk=row.pk).update(revoked_at=timezone.now())


@contextmanager
def worker_tokens(worker_ids: list[str]) -> Iterator[list[str]]:
    """One token per replay worker, bound to it, revoked when the mode ends: the replay's
    workers are told apart as a secure deployment's are (the default token quorum)."""
    issued = [AgentToken.issue(name="outage-replay", worker_id=w) for w in worker_ids]
    try:
        yield [raw for _, raw in issued]
    finally:
        pks = [row.pk for row, _ in issued]
        AgentToken.objects.filter(pk__in=pks).update(revoked_at=timezone.now())


@contextmanager
def compressed_policy(*, scenario: Scenario, speed: float) -> Iterator[None]:
    """Scale web_search's fleet cooldowns to the replay's clock; restore them afterwards."""
    tool, _ = Tool.objects.get_or_create(name=SEARCH)
    policy = ToolPolicy.objects.filter(tool=tool).first()
    saved = {
        "cooldown_seconds": policy.cooldown_seconds if policy else None,
        "max_cooldown_seconds": policy.max_cooldown_seconds if policy else None,
        "spend_amount_usd": policy.spend_amount_usd if policy else None,
        "spend_window_seconds": policy.spend_window_seconds if policy else None,
    }
    low, high = POLICY_BOUNDS["spend_window_seconds"]
    changes = {
        "cooldown_seconds": scenario.cooldown_s / speed,
        "max_cooldown_seconds": scenario.max_cooldown_s / speed,
        # The replay says whether the spend rule is on (0: off, whatever the settings say).
        "spend_amount_usd": scenario.spend_amount_usd,
        "spend_window_seconds": min(max(scenario.spend_window_s / speed, low), high),
    }
    tool_policy_update(tool_name=SEARCH, changes=changes, actor="outage replay")
    try:
        yield
    finally:
        tool_policy_update(tool_name=SEARCH, changes=saved, actor="outage replay")


def simulate_modes(
    *,
    modes: list[str],
    scenario: Scenario,
    speed: float,
    url: str,
    token: AgentToken,
    on_run: Callable[[str, RunRecord], None] | None = None,
    on_mode: Callable[[str], None] | None = None,
    fleet_push: bool = True,
    agent: str = "hand-written",
) -> list[ReplayResult]:
    """Replay each mode in turn; return what each measured (simulated seconds), in order.

    ``agent`` says who plays the runs (``AGENTS``): the hand-written agent, or the same scripted
    model through Pydantic AI and the SDK's integration."""
    unknown = set(modes) - set(MODES)
    if unknown:
        raise ReplayError(f"unknown mode(s) {sorted(unknown)}; choose from {list(MODES)}")
    if agent not in AGENTS:
        raise ReplayError(f"unknown agent {agent!r}; choose from {list(AGENTS)}")
    results = []
    # Every mode of one invocation shares a batch id, so the Outages page compares them together.
    batch = f"{timezone.now():%Y%m%dT%H%M%S.%f}"
    with compressed_policy(scenario=scenario, speed=speed):
        for mode in modes:
            if on_mode is not None:
                on_mode(mode)
            fleet_operator_action(
                tool_name=SEARCH, action=OperatorActionKind.RESET, reason=ACTOR_REASON, token=token
            )
            results.append(
                _replay_one(
                    mode=mode,
                    scenario=scenario,
                    speed=speed,
                    url=url,
                    batch=batch,
                    on_run=on_run,
                    fleet_push=fleet_push,
                    agent=agent,
                    modes_planned=modes,
                    token=token,
                )
            )
    return results


def _player(agent: str) -> tuple[RunPlayer, Callable[[], int]]:
    """The agent that plays the runs, and how many runs its framework ended with an error."""
    if agent == "hand-written":
        return play_hand_written, lambda: 0
    try:
        from breakers.replay.pydantic_ai_agent import PydanticAIPlayer
    except ImportError as error:
        raise ReplayError(
            f"--agent pydantic-ai needs Pydantic AI 2.x ({error}): pip install pydantic-ai-slim"
        ) from None
    player = PydanticAIPlayer()
    return player, lambda: player.errors


def _replay_one(
    *,
    mode: str,
    scenario: Scenario,
    speed: float,
    url: str,
    batch: str,
    on_run: Callable[[str, RunRecord], None] | None,
    fleet_push: bool,
    agent: str,
    modes_planned: Sequence[str] = (),
    token: AgentToken | None = None,
) -> ReplayResult:
    player, errors = _player(agent)
    started = timezone.now()
    row = OutageReplay.objects.create(
        mode=mode,
        speed=speed,
        worker_prefix=f"{AGENT}-replay-{started:%Y%m%d%H%M%S%f}-{mode}-",
        started_at=started,
        outage_started_at=started + timedelta(seconds=scenario.outage_start_s / speed),
        outage_ended_at=started + timedelta(seconds=scenario.outage_end_s / speed),
        scenario={
            **json.loads(json.dumps(asdict(scenario), default=str)),
            "batch": batch,
            "fleet_sync": "push" if fleet_push else "poll",
            "agent": agent,
            # What the command was asked to play: a batch without one of them was interrupted.
            "modes_planned": list(modes_planned),
        },
    )
    worker_ids = replay_worker_ids(scenario=scenario, mode=mode, prefix=row.worker_prefix)
    try:
        with worker_tokens(worker_ids) as tokens:
            result: ModeResult = replay_mode(
                scenario=scenario,
                mode=mode,
                url=url,
                token=tokens,
                speed=speed,
                worker_prefix=row.worker_prefix,
                on_run=(lambda record: on_run(mode, record)) if on_run else None,
                fleet_push=fleet_push,
                player=player,
                fleet_closed=search_closed if "fleet" in SCOPES_BY_MODE[mode] else None,
            )
    except BaseException as error:  # Ctrl-C and SIGTERM too: the row must not stay "playing"
        mark_interrupted(row, why=type(error).__name__)
        raise
    summary = {
        **result.summary(scenario),
        "agent": agent,
        "agent_errors": errors(),
        **end_closed(mode=mode, result=result, token=token),
    }
    row.finished_at = timezone.now()
    summary.update(_first_opening(row, result, speed=speed))
    row.summary = summary
    # Where the replay's clock paused for the control plane, the outage began and ended later
    # than planned: the pages classify runs by these.
    row.outage_started_at = result.wall_times.get("outage_start", row.outage_started_at)
    row.outage_ended_at = result.wall_times.get("outage_end", row.outage_ended_at)
    # The pages take these out of the runs' durations, as the table's clock did.
    row.pauses = [[round(a, 6), round(b, 6)] for a, b in result.paused_spans]
    row.save(
        update_fields=["finished_at", "summary", "outage_started_at", "outage_ended_at", "pauses"]
    )
    return ReplayResult.of(row)


def _first_opening(row: OutageReplay, result: ModeResult, *, speed: float) -> dict[str, Any]:
    """When the fleet breaker first opened web_search after the outage began, in simulated
    seconds (the clock's pauses taken out), and by which rule; None when it did not open."""
    outage = result.wall_times.get("outage_start", row.outage_started_at)
    opening = next(
        (
            t
            for t in FleetTransition.objects.filter(
                tool__name=SEARCH, at__gte=outage, at__lte=row.finished_at
            ).order_by("seq")
            if t.opening_rule is not None
        ),
        None,
    )
    if opening is None:
        return {"fleet_opened_s": None, "fleet_opened_by": None}
    start, end = outage.timestamp(), opening.at.timestamp()
    paused = sum(max(0.0, min(b, end) - max(a, start)) for a, b in result.paused_spans)
    return {
        "fleet_opened_s": round((end - start - paused) * speed, 1),
        "fleet_opened_by": opening.opening_rule,
    }


def search_closed() -> bool:
    """web_search is closed in the fleet and has no open incident."""
    try:
        state = fleet_state().tools.get(SEARCH, {}).get("state")
    except FLEET_STORE_ERRORS:
        return False
    if state != "closed":
        return False
    return not Incident.objects.filter(tool__name=SEARCH, closed_at__isnull=True).exists()


def tick_note() -> str:
    """Why no trial could close the tool, when the reason is the control plane's Celery: the
    fleet tick, which makes an open tool half-open, has not run lately (empty otherwise)."""
    try:
        age = beat_heartbeat_age()
    except redis.RedisError:
        return ""
    if age is not None and age <= max(5.0, 10 * settings.BREAKER_TICK_SECONDS):
        return ""
    when = "has not run" if age is None else f"last ran {age:.0f} s ago"
    return (
        f"; the control plane's fleet tick, which makes an open tool half-open, {when}: its "
        "Celery worker is stopped or behind beat (see /readyz)"
    )


def end_closed(*, mode: str, result: ModeResult, token: AgentToken | None) -> dict[str, Any]:
    """Leave web_search closed, its incident resolved, after one mode; say how it got there.

    A fleet-scope mode's agents close it themselves with a trial call (``replay_mode`` plays on
    until they have); when they have not, or when the mode's agents never use the fleet breaker
    (the server's breaker still opens on what they report), the replay resets it with the
    reason in words, which the incident's timeline and the summary's ``recovery_note`` keep."""
    uses_fleet = "fleet" in SCOPES_BY_MODE[mode]
    figures: dict[str, Any] = {"recovery_runs": result.recovery_runs, "recovery_note": ""}
    if result.recovery_lag_s is None:
        figures["recovery_note"] = (
            f"no run used web_search again within {RECOVERY_LIMIT_S / 60:g} simulated minutes "
            "after the story"
        )
    figures["fleet_recovered"] = search_closed()
    if not figures["fleet_recovered"]:
        why = (
            f"no trial call closed it within {RECOVERY_LIMIT_S / 60:g} simulated minutes after "
            f"the story ({result.recovery_runs} more runs){tick_note()}"
            if uses_fleet
            else f"mode {mode}'s agents do not use the fleet breaker, so no trial call of theirs "
            "could close it"
        )
        figures["fleet_reset_reason"] = why
        fleet_operator_action(
            tool_name=SEARCH,
            action=OperatorActionKind.RESET,
            reason=f"outage replay ended mode {mode}: {why}",
            token=token,
        )
    return figures


def mark_interrupted(row: OutageReplay, *, why: str) -> None:
    """Record that a replay stopped half-played: finished now, with no figures but the mark, so
    no page takes it for one still playing or for a finished batch (``replay_interrupted``)."""
    row.finished_at = timezone.now()
    row.summary = {"mode": row.mode, "interrupted": True, "interrupted_by": why[:100]}
    row.save(update_fields=["finished_at", "summary"])


def format_table(summaries: Sequence[Mapping[str, Any]]) -> str:
    """The comparison table the command prints (and the docs quote)."""
    header = (
        f"{'mode':<10} {'runs':>5} {'model calls':>11} {'spend $':>9} {'$/run':>6} "
        f"{'mean s':>7} {'p95 s':>7} {'search calls':>12} {'HTTP att.':>9} "
        f"{'degraded':>8} {'recovery lag s':>14}"
    )
    lines = [header, "-" * len(header)]
    for s in summaries:
        per_run = s["model_spend_usd"] / s["runs"] if s["runs"] else 0.0
        lag = "-" if s["recovery_lag_s"] is None else f"{s['recovery_lag_s']:.0f}"
        lines.append(
            f"{s['mode']:<10} {s['runs']:>5} {s['model_calls']:>11} {s['model_spend_usd']:>9.2f} "
            f"{per_run:>6.2f} {s['mean_run_duration_s']:>7.1f} {s['p95_run_duration_s']:>7.1f} "
            f"{s['web_search_calls']:>12} {s['http_attempts']:>9} {s['degraded_runs']:>8} "
            f"{lag:>14}"
        )
    return "\n".join(lines)
