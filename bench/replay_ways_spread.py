"""Spread of `replay_ways` plays repeated (bench/replay_ways_spread.sh): per (provider, mode, way)
the spend, calls and hidden calls of each play, their mean and range, and per play the spend of
each way against `remove`'s in the same play. Usage:

    python3 bench/replay_ways_spread.py var/spread-*/quiet.json
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def main(paths: list[str]) -> None:
    plays = [json.loads(Path(p).read_text())["rows"] for p in paths]
    by_key: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for rows in plays:
        for row in rows:
            by_key[(row["provider"], row["mode"], row["way"] or "-")].append(row)
    print(f"{len(plays)} plays: {', '.join(paths)}")
    print(
        f"{'provider':<9} {'mode':<7} {'way':<8} {'spend $ per play':<28} {'mean':>7} "
        f"{'min-max':>13} {'calls':<20} {'hidden':<14} {'mean s':<20}"
    )
    for (provider, mode, way), rows in by_key.items():
        spend = [r["spend_usd"] for r in rows]
        durations = [r["mean_run_duration_s"] for r in rows]
        print(
            f"{provider:<9} {mode:<7} {way:<8} {' '.join(f'{s:.3f}' for s in spend):<28} "
            f"{sum(spend) / len(spend):>7.3f} {min(spend):>6.3f}-{max(spend):<6.3f} "
            f"{' '.join(str(r['model_calls']) for r in rows):<20} "
            f"{' '.join(str(r['hidden_tool_calls']) for r in rows):<14} "
            f"{' '.join(f'{d:.1f}' for d in durations):<20}"
        )
    print("per play, each way's spend minus remove's in the same play (same provider and mode):")
    for i, rows in enumerate(plays, 1):
        remove = {(r["provider"], r["mode"]): r["spend_usd"] for r in rows if r["way"] == "remove"}
        diffs = [
            f"{r['provider']} {r['mode']} {r['way']} {r['spend_usd'] - remove[key]:+.4f}"
            for r in rows
            if r["way"] not in (None, "remove") and (key := (r["provider"], r["mode"])) in remove
        ]
        print(f"  play {i}: {'; '.join(diffs)}")


if __name__ == "__main__":
    main(sys.argv[1:])
