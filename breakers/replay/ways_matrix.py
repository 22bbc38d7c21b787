"""The outage replay with prompt caching on: every mode against an Anthropic-shaped and an
OpenAI-shaped model, and the removal modes once per way of taking the tool away (``remove``,
``restrict``, ``refuse``). Per play: spend priced with the provider's cache rates, the share of
input tokens read from the cache before and during the outage, calls of the hidden tool after
the notice, run duration. Plays are not recorded as ``OutageReplay`` rows (the Outages page
compares modes of one way there, and these are many ways of each mode): the command records an
invocation as one ``WaysReplay`` (``breakers.replay.ways_records``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from breaker_panel.vocabulary import WAYS
from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import fleet_operator_action
from breakers.replay.agent import DEFAULT_WAY
from breakers.replay.caching import PROVIDERS, PromptLayout
from breakers.replay.modes import replay_mode, replay_worker_ids
from breakers.replay.orchestration import (
    ACTOR_REASON,
    ReplayError,
    check_control_plane,
    compressed_policy,
    replay_token,
    worker_tokens,
)
from breakers.replay.scenario import MODES, Scenario
from breakers.replay.script import SEARCH

__all__ = (
    "REPLAY_WAYS",
    "WAY_MODES",
    "assumptions",
    "cheapest_ways",
    "format_ways_table",
    "play_ways",
)

# The modes whose breaker takes the tool away, so that the way matters.
WAY_MODES = ("run", "worker", "fleet")
# The contract's three ways, and the SDK's default (no way named: a tool lost before a run's
# first call is removed, one lost later taken away in the shape's cache-keeping way).
REPLAY_WAYS = (*WAYS, DEFAULT_WAY)
# The goal: the cached-input share during the outage at least this share of the one before.
KEEP_SHARE = 0.9


def plays(
    providers: Sequence[str], modes: Sequence[str], ways: Sequence[str]
) -> list[tuple[str, str, str | None]]:
    """(provider, mode, way) in the order played; modes that never take a tool away once."""
    return [
        (provider, mode, way)
        for provider in providers
        for mode in modes
        for way in (ways if mode in WAY_MODES else (None,))
    ]


def play_ways(
    *,
    scenario: Scenario,
    url: str,
    speed: float,
    providers: Sequence[str] = tuple(PROVIDERS),
    modes: Sequence[str] = MODES,
    ways: Sequence[str] = REPLAY_WAYS,
    fleet_push: bool = True,
    on_play: Callable[[str, str, str | None], None] | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Play every (provider, mode, way) against the control plane at ``url``; one row each,
    handed to ``on_row`` as soon as its play finishes (the command records it then)."""
    for name, chosen, known in (
        ("provider", providers, PROVIDERS),
        ("mode", modes, MODES),
        ("way", ways, REPLAY_WAYS),
    ):
        unknown = set(chosen) - set(known)
        if unknown:
            raise ReplayError(f"unknown {name}(s) {sorted(unknown)}; choose from {list(known)}")
    rows = []
    with replay_token() as (token, raw):
        check_control_plane(url=url, token=raw)
        with compressed_policy(scenario=scenario, speed=speed):
            for provider, mode, way in plays(providers, modes, ways):
                if on_play is not None:
                    on_play(provider, mode, way)
                fleet_operator_action(
                    tool_name=SEARCH,
                    action=OperatorActionKind.RESET,
                    reason=ACTOR_REASON,
                    token=token,
                )
                prefix = f"research-ways-{provider}-{mode}-{way or 'none'}-"
                ids = replay_worker_ids(scenario=scenario, mode=mode, prefix=prefix)
                with worker_tokens(ids) as tokens:
                    result = replay_mode(
                        scenario=scenario,
                        mode=mode,
                        url=url,
                        token=tokens,
                        speed=speed,
                        worker_prefix=prefix,
                        fleet_push=fleet_push,
                        way=way,
                        provider=provider,
                    )
                rows.append(_row(result.summary(scenario), provider))
                if on_row is not None:
                    on_row(rows[-1])
    return rows


def _row(summary: Mapping[str, Any], provider: str) -> dict[str, Any]:
    cached = summary["caching"][provider]
    return {
        "provider": provider,
        "mode": summary["mode"],
        "way": summary["way"],
        "runs": summary["runs"],
        "model_calls": summary["model_calls"],
        "spend_usd": cached["spend_usd"],
        "spend_uncached_usd": cached["spend_uncached_usd"],
        "cached_share_pre_outage": cached["cached_share_pre_outage"],
        "cached_share_outage": cached["cached_share_outage"],
        "cached_share_kept": cached["cached_share_kept"],
        "cache_write_tokens": cached["cache_write_tokens"],
        "hidden_tool_calls": summary["hidden_tool_calls"],
        "mean_run_duration_s": summary["mean_run_duration_s"],
        "web_search_calls": summary["web_search_calls"],
        "events_dropped": summary["events_dropped"],
        "rule": cached["rule"],
    }


def cheapest_ways(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per provider: each way's spend summed over the removal modes, the cheapest way, what it
    saves against ``remove``, and whether it meets the goal in every mode (cached share during
    the outage >= 90% of the share before it, spend no higher than ``remove``'s)."""
    verdicts: dict[str, dict[str, Any]] = {}
    for provider in dict.fromkeys(row["provider"] for row in rows):
        mine = [r for r in rows if r["provider"] == provider and r["way"] is not None]
        spend: dict[str, float] = {}
        for row in mine:
            spend[row["way"]] = spend.get(row["way"], 0.0) + row["spend_usd"]
        if not spend:
            continue
        cheapest = min(spend, key=lambda way: spend[way])
        remove = {r["mode"]: r["spend_usd"] for r in mine if r["way"] == "remove"}
        # Against remove in the same modes only: without remove's figures there is no verdict.
        meets = {
            way: all(
                r["mode"] in remove
                and (r["cached_share_kept"] or 0.0) >= KEEP_SHARE
                and r["spend_usd"] <= remove[r["mode"]] + 1e-9
                for r in mine
                if r["way"] == way
            )
            for way in spend
        }
        saves = spend["remove"] - spend[cheapest] if "remove" in spend else None
        verdicts[provider] = {
            "spend_by_way": spend,
            "cheapest": cheapest,
            "saves_vs_remove_usd": saves,
            "meets_goal": meets if remove else None,
        }
    return verdicts


def assumptions(scenario: Scenario, layout: PromptLayout | None = None) -> list[str]:
    """The scripted model's assumptions, printed beside the figures."""
    layout = layout or PromptLayout()
    return [
        f"prompt: tools {layout.tool_tokens} tokens each (2 tools), system "
        f"{layout.system_tokens}, task {layout.task_tokens}, +{layout.step_tokens} per step "
        f"taken, {scenario.output_tokens} output tokens per call; the notice "
        f"({layout.notice_tokens} tokens) rides after the newest step, outside any cached prefix",
        f"the model asks for a tool the notice says is gone, while it is still in its tools "
        f"array (refuse), on {scenario.ignores_notice_probability:.0%} of its steps; remove "
        "and restrict make that impossible",
        f"{scenario.wrap_up_steps} model call(s) to finish once the tool is gone; every run "
        "of a mode shares one organisation's cache; prefixes are the same bytes for every run "
        "up to the end of the system prompt",
        *(provider.rule() for provider in PROVIDERS.values()),
    ]


def format_ways_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The table ``replay_ways`` prints (and docs/benchmarks.md quotes)."""
    header = (
        f"{'provider':<9} {'mode':<9} {'way':<8} {'runs':>5} {'calls':>6} {'spend $':>8} "
        f"{'no-cache $':>10} {'cached pre':>10} {'cached out':>10} {'kept':>5} "
        f"{'hidden calls':>12} {'mean s':>7}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        kept = "-" if r["cached_share_kept"] is None else f"{r['cached_share_kept']:.0%}"
        lines.append(
            f"{r['provider']:<9} {r['mode']:<9} {r['way'] or '-':<8} {r['runs']:>5} "
            f"{r['model_calls']:>6} {r['spend_usd']:>8.2f} {r['spend_uncached_usd']:>10.2f} "
            f"{_pct(r['cached_share_pre_outage']):>10} {_pct(r['cached_share_outage']):>10} "
            f"{kept:>5} {r['hidden_tool_calls']:>12} {r['mean_run_duration_s']:>7.1f}"
        )
    for provider, verdict in cheapest_ways(rows).items():
        spend = ", ".join(f"{w} ${s:.2f}" for w, s in verdict["spend_by_way"].items())
        cheapest = verdict["cheapest"]
        line = f"{provider}: spend over the removal modes by way: {spend}; cheapest {cheapest}"
        if verdict["meets_goal"] is None:
            lines.append(f"{line} (remove not played: no comparison)")
            continue
        goal = ", ".join(f"{w} {'yes' if ok else 'no'}" for w, ok in verdict["meets_goal"].items())
        lines.append(
            f"{line} (saves ${verdict['saves_vs_remove_usd']:.2f} against remove); meets the "
            f"goal (share kept >= {KEEP_SHARE:.0%}, spend <= remove's) in every mode: {goal}"
        )
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"
