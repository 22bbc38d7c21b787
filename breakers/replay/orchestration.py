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

from django.conf import settings
from django.utils import timezone

from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import fleet_operator_action, tool_policy_update
from breakers.models import POLICY_BOUNDS, FleetTransition, Tool, ToolPolicy
from breakers.replay.agent import AGENT, AGENTS, RunPlayer, RunRecord, play_hand_written
from breakers.replay.modes import ModeResult, replay_mode, replay_worker_ids
from breakers.replay.result import ReplayResult
from breakers.replay.scenario import MODES, Scenario
from breakers.replay.script import SEARCH
from runs.models import AgentToken, OutageReplay

__all__ = (
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


# The control plane's own intervals, in real seconds at speed 1. Beat cannot usefully tick much
# faster than 10 times a second, so the tick has a floor (6 simulated seconds at 60x).
_SERVER_INTERVALS = {
    "BREAKER_TICK_SECONDS": (1.0, 0.1),
    # The trial call's event must reach the control plane while the lease lives. That takes
    # real seconds on a busy machine however fast the story runs (and the SDK counts a lease
    # 1 s short for the HTTP Date's whole seconds): below 10 s trials kept expiring unheard.
    "BREAKER_TRIAL_LEASE_SECONDS": (120.0, 10.0),
    "BREAKER_STALE_OUTCOME_SECONDS": (2.0, 0.0),
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
        },
    )
    worker_ids = replay_worker_ids(scenario=scenario, mode=mode, prefix=row.worker_prefix)
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
        )
    summary = {**result.summary(scenario), "agent": agent, "agent_errors": errors()}
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
