"""The replay's prompt caches: each provider's rule on hand-made calls, prices from genai-prices,
and one run per way of taking the tool away through the replay's own agent and a real
``ControlPlane`` (not started: worker scope needs no server)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from decimal import Decimal

import pytest

from breaker_panel import ControlPlane, PlaneConfig
from breakers.replay.agent import Recovery, RunRecord, _play_run
from breakers.replay.caching import (
    PROVIDERS,
    CachedUsage,
    PromptCall,
    PromptLayout,
    cache_summary,
    meter_calls,
    price_call,
    rates_of,
)
from breakers.replay.scenario import Scenario
from breakers.replay.script import READ, SEARCH
from breakers.replay.ways_matrix import cheapest_ways, plays
from tests.economics.clocks import SteppedClock

ANTHROPIC, OPENAI = PROVIDERS["anthropic"], PROVIDERS["openai"]
BOTH = (SEARCH, READ)
LAYOUT = PromptLayout()


def calls(run: float, tools_by_step: list[tuple[str, ...]], start: float = 0.0) -> list[PromptCall]:
    return [
        PromptCall(start + 2.0 * step, run, tools, step, tools != BOTH, 270)
        for step, tools in enumerate(tools_by_step)
    ]


def usages(provider_calls: list[PromptCall], provider: object) -> list[CachedUsage]:
    return [usage for _, usage in meter_calls(provider_calls, provider)]  # type: ignore[arg-type]


def test_anthropic_writes_at_its_breakpoints_and_reads_the_last_steps_prefix() -> None:
    first, second = usages(calls(0.0, [BOTH, BOTH]), ANTHROPIC)
    assert (first.cache_read_tokens, first.cache_write_tokens) == (0, 4000)
    assert (second.cache_read_tokens, second.cache_write_tokens) == (4000, 700)


def test_a_changed_tools_array_breaks_the_prefix_from_the_tools_on() -> None:
    *_, removed = usages(calls(0.0, [BOTH, BOTH, (READ,)]), ANTHROPIC)
    assert removed.cache_read_tokens == 0
    assert (
        removed.cache_write_tokens
        == LAYOUT.input_tokens(calls(0.0, [BOTH] * 2 + [(READ,)])[2]) - 60
    )
    # The same array kept (refuse, restrict): the prefix holds.
    *_, kept = usages(calls(0.0, [BOTH, BOTH, BOTH]), ANTHROPIC)
    assert kept.cache_read_tokens == 4700


def test_runs_share_the_tools_and_system_prefix_but_not_their_task() -> None:
    both = calls(0.0, [BOTH]) + calls(1.0, [BOTH], start=1.0)
    anthropic = usages(both, ANTHROPIC)
    assert anthropic[1].cache_read_tokens == 1200 + 2300  # tools + system
    assert anthropic[1].cache_write_tokens == 500  # its own task
    openai = usages(both, OPENAI)
    assert openai[1].cache_read_tokens == 3456  # 3,500 in 128-token steps
    assert openai[1].cache_write_tokens == 0  # no write premium, nothing counted as written


def test_entries_expire_after_their_lifetime_and_short_prefixes_are_never_cached() -> None:
    late = [PromptCall(0.0, 0.0, BOTH, 0, False, 1), PromptCall(301.0, 0.0, BOTH, 1, False, 1)]
    assert usages(late, OPENAI)[1].cache_read_tokens == 0
    assert usages(late, ANTHROPIC)[1].cache_read_tokens == 0
    tiny = PromptLayout(tool_tokens=100, system_tokens=300, task_tokens=100, step_tokens=100)
    short = [PromptCall(float(i), 0.0, BOTH, i, False, 1) for i in range(3)]
    metered = meter_calls(short, OPENAI, tiny)  # 600 to 800 tokens: under 1,024
    assert [usage.cache_read_tokens for _, usage in metered] == [0, 0, 0]


def test_prices_come_from_genai_prices_with_cache_rates_apart() -> None:
    assert rates_of(ANTHROPIC) == {"read": 0.1, "write": 1.25}
    assert 0.1 <= rates_of(OPENAI)["read"] <= 0.5 and rates_of(OPENAI)["write"] == 0
    plain = price_call(ANTHROPIC, CachedUsage(10_000, 0, 0, 0))
    read = price_call(ANTHROPIC, CachedUsage(10_000, 10_000, 0, 0))
    written = price_call(ANTHROPIC, CachedUsage(10_000, 0, 10_000, 0))
    assert read < plain < written and written == plain * Decimal("1.25")


def test_the_summary_compares_the_cached_share_before_and_during_the_outage() -> None:
    before = calls(0.0, [BOTH] * 5)
    during = calls(1.0, [BOTH, BOTH, (READ,), (READ,)], start=100.0)
    summary = cache_summary(
        [(False, before), (True, during)], provider=ANTHROPIC, outage=(50.0, 500.0)
    )
    assert 0 < summary["cached_share_outage"] < summary["cached_share_pre_outage"] < 1
    assert summary["cached_share_kept"] == pytest.approx(
        summary["cached_share_outage"] / summary["cached_share_pre_outage"]
    )
    assert summary["spend_usd"] < summary["spend_uncached_usd"]  # only the window's runs
    assert "1.25x" in summary["rule"] and "claude-opus-4-5" in summary["rule"]


# -- one run per way, through the replay's agent ---------------------------------------------

DOWN = Scenario(baseline_s=0.0, wrap_up_steps=2)


@pytest.fixture
def planes() -> Iterator[list[ControlPlane]]:
    made: list[ControlPlane] = []
    yield made
    for plane in made:
        plane.close(timeout=0.1)


@pytest.fixture
def plane(planes: list[ControlPlane]) -> ControlPlane:
    return new_plane(planes)


def new_plane(planes: list[ControlPlane]) -> ControlPlane:
    """A worker of its own: a run on it starts with every tool closed."""
    plane = ControlPlane(
        "http://127.0.0.1:9",
        token="t",
        worker_id=f"w{len(planes)}",
        config=PlaneConfig(scopes=("worker",)),
        start=False,
    )
    planes.append(plane)
    return plane


def one_run(
    plane: ControlPlane, way: str | None, provider: str, scenario: Scenario = DOWN
) -> RunRecord:
    return _play_run(
        scenario=scenario,
        mode="worker",
        plane=plane,
        clock=SteppedClock(),
        rng=random.Random(7),
        recovery=Recovery(),
        way=way,
        provider=provider,
    )


def test_remove_changes_the_tools_array_and_restrict_keeps_it(
    planes: list[ControlPlane],
) -> None:
    removed = one_run(new_plane(planes), "remove", "openai")
    assert {p.tools for p in removed.prompts} == {BOTH, (READ,)}
    restricted = one_run(new_plane(planes), "restrict", "openai")
    assert {p.tools for p in restricted.prompts} == {BOTH}
    # The provider forbids the tool: the model never asks for it again.
    assert restricted.hidden_calls == 0
    assert restricted.search_calls_failing == removed.search_calls_failing == DOWN.threshold
    assert restricted.model_calls == removed.model_calls


def test_restrict_on_anthropic_falls_back_to_refuse_and_refuses_the_model_s_calls(
    plane: ControlPlane,
) -> None:
    stubborn = Scenario(baseline_s=0.0, wrap_up_steps=2, ignores_notice_probability=0.5)
    record = one_run(plane, "restrict", "anthropic", stubborn)
    assert {p.tools for p in record.prompts} == {BOTH}  # the array stays
    assert record.hidden_calls > 0  # the tool was still in the array: it asked
    assert record.search_calls_failing == DOWN.threshold  # ...and never reached the vendor
    blocked = [e for e in plane.buffered() if e.get("outcome") == "blocked"]
    assert len(blocked) == record.hidden_calls
    # Every asked-for call cost a model step on top of the wrap-up.
    assert record.wrap_up_started_at is not None
    finished_at = record.wrap_up_started_at - 1 + stubborn.wrap_up_steps + record.hidden_calls
    assert record.model_calls == min(stubborn.step_budget, finished_at)


def test_an_obedient_model_under_refuse_costs_what_restrict_costs(
    planes: list[ControlPlane],
) -> None:
    obedient = Scenario(baseline_s=0.0, wrap_up_steps=2, ignores_notice_probability=0.0)
    refused = one_run(new_plane(planes), "refuse", "openai", obedient)
    restricted = one_run(new_plane(planes), "restrict", "openai", obedient)
    assert refused.hidden_calls == 0
    assert refused.model_calls == restricted.model_calls and refused.spend == restricted.spend


def test_the_ways_keep_the_cache_that_remove_breaks(planes: list[ControlPlane]) -> None:
    by_way = {way: one_run(new_plane(planes), way, "anthropic") for way in ("remove", "refuse")}
    spend = {}
    for way, record in by_way.items():
        summary = cache_summary([(True, record.prompts)], provider=ANTHROPIC, outage=(0.0, 1e9))
        spend[way] = summary["spend_usd"]
        assert summary["cached_share_outage"] is not None
    # One call of remove's run rewrites the whole prompt at 1.25x.
    writes = {
        way: max(u.cache_write_tokens for u in usages(r.prompts, ANTHROPIC))
        for way, r in by_way.items()
    }
    assert writes["remove"] > 4000 >= writes["refuse"]


def test_the_matrix_plays_every_way_of_the_removal_modes_only_and_names_the_cheapest() -> None:
    played = plays(["openai"], ["none", "run", "fleet"], ["remove", "refuse"])
    assert played == [
        ("openai", "none", None),
        ("openai", "run", "remove"),
        ("openai", "run", "refuse"),
        ("openai", "fleet", "remove"),
        ("openai", "fleet", "refuse"),
    ]
    rows = [
        {"provider": "openai", "mode": m, "way": w, "spend_usd": s, "cached_share_kept": k}
        for m, w, s, k in (
            ("run", "remove", 10.0, 0.8),
            ("run", "refuse", 9.0, 0.95),
            ("fleet", "remove", 5.0, 0.85),
            ("fleet", "refuse", 5.5, 0.97),
        )
    ]
    verdict = cheapest_ways(rows)["openai"]
    assert verdict["cheapest"] == "refuse" and verdict["saves_vs_remove_usd"] == pytest.approx(0.5)
    # refuse is cheaper overall but dearer than remove in fleet mode: it misses the goal there.
    assert verdict["meets_goal"] == {"remove": False, "refuse": False}


def test_a_replay_row_carries_its_cache_figures_and_a_corrupt_one_reads_as_none() -> None:
    from breakers.replay.outage import ReplayResult
    from runs.models import OutageReplay

    figures = {"caching": {"openai": {"spend_usd": 1.5}, "anthropic": "corrupt"}}
    result = ReplayResult.of(OutageReplay(mode="fleet", scenario={}, summary=figures))
    assert result.caching == {"openai": {"spend_usd": 1.5}}
    assert ReplayResult.of(OutageReplay(mode="fleet", scenario={}, summary={})).caching == {}


def test_a_mode_s_summary_prices_its_runs_at_every_provider_the_play_stands_for(
    planes: list[ControlPlane],
) -> None:
    from breakers.replay.modes import ModeResult

    runs = [one_run(new_plane(planes), None, "openai")]
    plain = ModeResult(mode="worker", runs=runs).summary(DOWN)
    assert plain["way"] == "remove" and set(plain["caching"]) == {"anthropic", "openai"}
    restricted = ModeResult(mode="worker", way="restrict", provider="openai", runs=runs)
    assert set(restricted.summary(DOWN)["caching"]) == {"openai"}
    assert ModeResult(mode="none", runs=runs).summary(DOWN)["way"] is None
    for figures in plain["caching"].values():
        assert 0 < figures["spend_usd"] < figures["spend_uncached_usd"]


def test_the_default_way_removes_a_tool_lost_before_the_first_call_and_keeps_the_array_after(
    planes: list[ControlPlane],
) -> None:
    plane = new_plane(planes)
    first = one_run(plane, "default", "anthropic")  # loses the tool mid-run: refused
    assert {p.tools for p in first.prompts} == {BOTH}
    later = one_run(plane, "default", "anthropic")  # the worker lost it before: removed
    assert {p.tools for p in later.prompts} == {(READ,)}
    assert later.hidden_calls == 0 and later.search_calls == 0


def test_without_remove_s_figures_there_is_no_verdict_on_the_goal() -> None:
    rows = [{"provider": "openai", "mode": "run", "way": "refuse", "spend_usd": 1.0,
             "cached_share_kept": 1.0}]  # fmt: skip
    verdict = cheapest_ways(rows)["openai"]
    assert verdict["meets_goal"] is None and verdict["saves_vs_remove_usd"] is None
