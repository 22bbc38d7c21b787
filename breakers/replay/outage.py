"""The outage replay's one public module: ``play_outage`` plays the story, ``ReplayResult`` is what
each mode measured, and the names the pages read. Nothing outside ``breakers.replay`` imports
another of its modules (``scripts/import_graph.py --check``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from breakers.replay.agent import AGENTS, RunRecord
from breakers.replay.caching import PROVIDERS
from breakers.replay.modes import SCOPES_BY_MODE
from breakers.replay.orchestration import (
    REPLAY_SERVER_SETTINGS,
    ReplayError,
    check_control_plane,
    format_table,
    replay_token,
    server_settings,
    server_settings_warnings,
    simulate_modes,
)
from breakers.replay.records import (
    PLAYING_AT_MOST,
    ReplayBatch,
    ReplayClock,
    group_replays,
    minutes_since,
    mode_label,
    mode_order,
    recent_replay_batches,
    replay_interrupted,
    replay_periods,
    replay_speed,
)
from breakers.replay.result import ReplayResult
from breakers.replay.scenario import FAILURES, MODES, Scenario
from breakers.replay.script import SEARCH
from breakers.replay.ways_matrix import (
    KEEP_SHARE,
    REPLAY_WAYS,
    WAY_MODES,
    assumptions,
    cheapest_ways,
    format_ways_table,
    play_ways,
)
from breakers.replay.ways_records import latest_ways_replays, play_and_record_ways, ways_status

__all__ = (
    "AGENTS",
    "FAILURES",
    "FLEET_MODES",
    "KEEP_SHARE",
    "MODES",
    "PLAYING_AT_MOST",
    "PROVIDERS",
    "REMOVAL_MODES",
    "REPLAY_SERVER_SETTINGS",
    "REPLAY_WAYS",
    "SEARCH",
    "WAY_MODES",
    "ReplayBatch",
    "ReplayClock",
    "ReplayError",
    "ReplayResult",
    "RunRecord",
    "Scenario",
    "assumptions",
    "cheapest_ways",
    "figures_json",
    "format_table",
    "format_ways_table",
    "group_replays",
    "latest_ways_replays",
    "minutes_since",
    "mode_label",
    "mode_order",
    "play_and_record_ways",
    "play_outage",
    "play_ways",
    "recent_replay_batches",
    "replay_interrupted",
    "replay_periods",
    "replay_speed",
    "server_settings",
    "server_settings_warnings",
    "ways_status",
)

# The modes whose breaker takes the tool out of the tools array (and sends a notice).
REMOVAL_MODES = ("run", "worker", "fleet")
# The modes whose agents use the fleet breaker, and so take its half-open trial.
FLEET_MODES = tuple(mode for mode, scopes in SCOPES_BY_MODE.items() if "fleet" in scopes)


def figures_json(
    *, scenario: Scenario, agent: str, results: Sequence[ReplayResult]
) -> dict[str, Any]:
    """What ``simulate_outage --json`` writes (and ``breakers.replay.check`` reads)."""
    return {
        "scenario": {
            k: (v if isinstance(v, int | float) else str(v)) for k, v in asdict(scenario).items()
        },
        "agent": agent,
        "modes": [dict(result.figures) for result in results],
    }


def play_outage(
    *,
    scenario: Scenario,
    url: str,
    speed: float,
    modes: Sequence[str] = MODES,
    agent: str = "hand-written",
    fleet_push: bool = True,
    on_run: Callable[[str, RunRecord], None] | None = None,
    on_mode: Callable[[str], None] | None = None,
) -> tuple[ReplayResult, ...]:
    """Play the outage once per mode, in order, against the control plane at ``url`` (its
    database is this process's), each mode recorded as an ``OutageReplay``; block until done
    and return what each mode measured, in the order played.

    A token of its own is issued for the replay and revoked after it. Raises ``ReplayError``
    when no control plane answers at ``url`` or a mode or agent is unknown."""
    with replay_token() as (token, raw):
        check_control_plane(url=url, token=raw)
        results = simulate_modes(
            modes=list(modes),
            scenario=scenario,
            speed=speed,
            url=url,
            token=token,
            on_run=on_run,
            on_mode=on_mode,
            fleet_push=fleet_push,
            agent=agent,
        )
    return tuple(results)
