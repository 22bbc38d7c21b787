"""``make replay-check``: is the replay's headline the same on a quiet and on a busy machine?

Pure: it reads the two ``simulate_outage --json`` files and says what fails.
``python -m breakers.replay.check QUIET.json BUSY.json`` exits 1 on any failure.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ("MAX_DRIFT", "MAX_FLEET_SEARCH_CALLS", "MAX_FLEET_SPEND_SHARE", "check", "main")

MAX_DRIFT = 0.15  # fleet spend and vendor calls, busy vs quiet
MAX_FLEET_SPEND_SHARE = 0.20  # of mode none's spend
MAX_FLEET_SEARCH_CALLS = 60


def _by_mode(report: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {mode["mode"]: mode for mode in report["modes"]}


def _drift(quiet: float, busy: float) -> float:
    return abs(busy - quiet) / quiet if quiet else (0.0 if busy == quiet else float("inf"))


def check(quiet: Mapping[str, Any], busy: Mapping[str, Any]) -> list[str]:
    """Every broken threshold, in words; empty when the replay holds."""
    failures = []
    runs = {"quiet": _by_mode(quiet), "busy": _by_mode(busy)}
    for name, modes in runs.items():
        if "fleet" not in modes or "none" not in modes:
            failures.append(f"the {name} replay has no fleet or none mode")
    if failures:
        return failures
    for field, label in (("model_spend_usd", "spend"), ("web_search_calls", "vendor calls")):
        q, b = runs["quiet"]["fleet"][field], runs["busy"]["fleet"][field]
        if _drift(q, b) > MAX_DRIFT:
            failures.append(
                f"fleet {label} differs by {_drift(q, b):.0%} between quiet ({q:g}) and busy "
                f"({b:g}); the limit is {MAX_DRIFT:.0%}"
            )
    for name, modes in runs.items():
        fleet, none = modes["fleet"], modes["none"]
        share = fleet["model_spend_usd"] / none["model_spend_usd"]
        if share > MAX_FLEET_SPEND_SHARE:
            failures.append(
                f"{name}: fleet spends {share:.1%} of mode none; the limit is "
                f"{MAX_FLEET_SPEND_SHARE:.0%}"
            )
        if fleet["web_search_calls"] > MAX_FLEET_SEARCH_CALLS:
            failures.append(
                f"{name}: fleet sent {fleet['web_search_calls']} calls to the failing vendor; "
                f"the limit is {MAX_FLEET_SEARCH_CALLS}"
            )
    return failures


def push_vs_poll(push: Mapping[str, Any], poll: Mapping[str, Any]) -> str:
    """Fleet mode with the fleet state pushed against polled: the vendor calls push saved."""
    a, b = _by_mode(push)["fleet"], _by_mode(poll)["fleet"]
    saved = b["web_search_calls"] - a["web_search_calls"]
    return (
        f"fleet push vs poll: {a['web_search_calls']} against {b['web_search_calls']} calls to "
        f"the failing vendor ({saved:+d} saved by push), ${a['model_spend_usd']:.2f} against "
        f"${b['model_spend_usd']:.2f}"
    )


def markdown_table(report: Mapping[str, Any]) -> str:
    """One replay's per-mode figures as the Markdown table the docs quote."""
    modes = _by_mode(report)
    none = modes.get("none", {})
    lines = [
        "| mode | runs | model calls | model spend | vs none | mean run s | faster than none "
        "| p95 run s | `web_search` calls at the failing vendor | HTTP attempts (all) "
        "| degraded runs | recovery lag s | clock paused (real s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in report["modes"]:
        share = m["model_spend_usd"] / none["model_spend_usd"] if none else 0.0
        faster = none["mean_run_duration_s"] / m["mean_run_duration_s"] if none else 0.0
        lag = "-" if m.get("recovery_lag_s") is None else f"{m['recovery_lag_s']:.0f}"
        lines.append(
            f"| {m['mode']} | {m['runs']} | {m['model_calls']:,} | ${m['model_spend_usd']:,.2f} "
            f"| {share:.1%} | {m['mean_run_duration_s']:.1f} | {faster:.1f}x "
            f"| {m['p95_run_duration_s']:.1f} | {m['web_search_calls']:,} | {m['http_attempts']:,} "
            f"| {m['degraded_runs']} | {lag} | {m.get('paused_real_s', 0):.0f} |"
        )
    return "\n".join(lines)


def sensitivity_table(report: Mapping[str, Any]) -> str:
    """Worker and fleet spend, re-priced for 1, 2 and 5 wrap-up steps, as shares of none."""
    modes = _by_mode(report)
    none = modes["none"]["model_spend_usd"]
    steps = sorted(modes["fleet"]["spend_by_wrap_up_steps"], key=int)
    head = " | ".join(f"{n} wrap-up step{'s' if n != '1' else ''}" for n in steps)
    lines = [f"| mode | {head} |", "|---|" + "---:|" * len(steps)]
    for mode in ("worker", "fleet"):
        cells = " | ".join(
            f"${modes[mode]['spend_by_wrap_up_steps'][n]:,.2f} "
            f"({modes[mode]['spend_by_wrap_up_steps'][n] / none:.1%})"
            for n in steps
        )
        lines.append(f"| {mode} | {cells} |")
    floors = modes["fleet"]["floor_spend_by_wrap_up_steps"]
    lines.append("| floor | " + " | ".join(f"{floors[n] / none:.1%}" for n in steps) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--markdown"] and len(argv) == 2:
        report = json.loads(Path(argv[1]).read_text())
        print(markdown_table(report))
        # The sensitivity table compares worker and fleet with none: a replay of fewer modes
        # (``--mode fleet``) has the first table only.
        if {"none", "worker", "fleet"} <= set(_by_mode(report)):
            print("\n" + sensitivity_table(report))
        return 0
    if argv[:1] == ["--push-vs-poll"] and len(argv) == 3:
        push, poll = (json.loads(Path(path).read_text()) for path in argv[1:])
        print(push_vs_poll(push, poll))
        return 0
    if len(argv) != 2:
        print("usage: python -m breakers.replay.check QUIET.json BUSY.json", file=sys.stderr)
        return 2
    quiet, busy = (json.loads(Path(path).read_text()) for path in argv)
    for name, report in (("quiet", quiet), ("busy", busy)):
        if not {"none", "fleet"} <= set(_by_mode(report)):
            continue  # check() says so below
        fleet, none = _by_mode(report)["fleet"], _by_mode(report)["none"]
        print(
            f"{name:>5}: fleet ${fleet['model_spend_usd']:.2f} "
            f"({fleet['model_spend_usd'] / none['model_spend_usd']:.1%} of none), "
            f"{fleet['web_search_calls']} calls to the failing vendor"
        )
    failures = check(quiet, busy)
    for failure in failures:
        print(f"FAIL {failure}")
    print("replay-check: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
