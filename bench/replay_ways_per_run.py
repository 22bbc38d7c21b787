"""Where two ways' spend differs, run by run: plays (provider, mode, way) of the outage replay
with prompt caching on (as `manage.py replay_ways` does) and splits each play's spend over the
runs started in the outage window by when each run first got the notice: before its first model
call (`settled`: the default way removes the tool), after h calls (hit mid-run), or never.
Per group: runs, model calls, hidden calls, spend. Run it against a control plane of its own:

    bench/replay_ways_per_run.sh --provider anthropic --mode worker --way remove default
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
import django

django.setup()

from breakers.fleet.rules import OperatorActionKind  # noqa: E402
from breakers.fleet_service import fleet_operator_action  # noqa: E402
from breakers.replay.agent import RunRecord  # noqa: E402
from breakers.replay.caching import PROVIDERS, meter_calls, price_call  # noqa: E402
from breakers.replay.modes import replay_mode, replay_worker_ids  # noqa: E402
from breakers.replay.orchestration import (  # noqa: E402
    ACTOR_REASON,
    check_control_plane,
    compressed_policy,
    replay_token,
    worker_tokens,
)
from breakers.replay.scenario import Scenario  # noqa: E402
from breakers.replay.script import SEARCH  # noqa: E402


def hit_at(record: RunRecord) -> str:
    """When the run first got the notice: 'settled' (first call), 'h=N' (after N calls), '-'."""
    for index, call in enumerate(record.prompts):
        if call.notice:
            return "settled" if index == 0 else f"h={min(index, 6)}{'+' if index >= 6 else ''}"
    return "-"


def breakdown(records: list[RunRecord], scenario: Scenario, provider: str) -> dict[str, list]:
    calls = [c for r in records for c in r.prompts]
    priced = {
        id(call): price_call(PROVIDERS[provider], usage)
        for call, usage in meter_calls(calls, PROVIDERS[provider])
    }
    groups: dict[str, list] = defaultdict(lambda: [0, 0, 0, Decimal(0)])
    for r in records:
        if not scenario.outage_start_s <= r.started_s < scenario.outage_end_s:
            continue
        group = groups[hit_at(r)]
        group[0] += 1
        group[1] += r.model_calls
        group[2] += r.hidden_calls
        group[3] += sum(priced[id(c)] for c in r.prompts)
    return dict(groups)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--speed", type=float, default=60.0)
    parser.add_argument("--provider", default="anthropic")
    parser.add_argument("--mode", default="worker")
    parser.add_argument("--way", nargs="+", default=["remove", "default"])
    parser.add_argument("--seed", type=int, nargs="+", default=[Scenario.seed])
    parser.add_argument(
        "--ignores-notice", type=float, nargs="+", default=[Scenario.ignores_notice_probability]
    )
    options = parser.parse_args()
    with replay_token() as (token, raw):
        check_control_plane(url=options.url, token=raw)
        for seed in options.seed:
            for ignores in options.ignores_notice:
                scenario = Scenario(seed=seed, ignores_notice_probability=ignores)
                with compressed_policy(scenario=scenario, speed=options.speed):
                    results = {way: play(scenario, options, token, way) for way in options.way}
                report(results, options, seed, ignores)


def play(scenario: Scenario, options: argparse.Namespace, token: object, way: str) -> dict:
    fleet_operator_action(
        tool_name=SEARCH, action=OperatorActionKind.RESET, reason=ACTOR_REASON, token=token
    )
    prefix = f"research-perrun-{options.provider}-{options.mode}-{way}-"
    ids = replay_worker_ids(scenario=scenario, mode=options.mode, prefix=prefix)
    with worker_tokens(ids) as tokens:
        result = replay_mode(
            scenario=scenario,
            mode=options.mode,
            url=options.url,
            token=tokens,
            speed=options.speed,
            worker_prefix=prefix,
            way=way,
            provider=options.provider,
        )
    return breakdown(result.runs, scenario, options.provider)


def report(results: dict, options: argparse.Namespace, seed: int, ignores: float) -> None:
    print(
        f"{options.provider} {options.mode}, seed {seed}, ignores-notice {ignores:g}: runs "
        "started in the outage window, by when the notice came",
        flush=True,
    )
    print(f"{'way':<8} {'notice':<8} {'runs':>5} {'calls':>6} {'hidden':>6} {'spend $':>9}")
    for way, groups in results.items():
        total = [0, 0, 0, Decimal(0)]
        for name in sorted(groups, key=lambda g: (g != "settled", g == "-", g)):
            runs, calls, hidden, spend = groups[name]
            total = [total[0] + runs, total[1] + calls, total[2] + hidden, total[3] + spend]
            print(f"{way:<8} {name:<8} {runs:>5} {calls:>6} {hidden:>6} {spend:>9.3f}")
        print(f"{way:<8} {'all':<8} {total[0]:>5} {total[1]:>6} {total[2]:>6} {total[3]:>9.3f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
