"""``python manage.py simulate_outage``: replay the search-vendor outage of the README."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from breakers.replay.outage import (
    AGENTS,
    FAILURES,
    MODES,
    REPLAY_SERVER_SETTINGS,
    ReplayError,
    ReplayResult,
    RunRecord,
    Scenario,
    figures_json,
    format_table,
    play_outage,
    server_settings,
    server_settings_warnings,
)


class Command(BaseCommand):
    help = (
        "Replay a 22-minute search-vendor outage through the real SDK and the HTTP ingest of a "
        "running control plane, once per breaker mode, and compare spend, duration and calls."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--mode", choices=[*MODES, "all"], default="all")
        parser.add_argument("--speed", type=float, default=60.0, help="time compression factor")
        parser.add_argument("--url", default=settings.SITE_URL, help="the control plane's URL")
        parser.add_argument("--runs", type=int, default=340, help="runs started in the window")
        parser.add_argument("--workers", type=int, default=8, help="agent worker processes")
        parser.add_argument("--window-minutes", type=float, default=22.0)
        parser.add_argument("--baseline-runs", type=int, default=40)
        parser.add_argument("--tail-runs", type=int, default=60)
        parser.add_argument("--seed", type=int, default=Scenario.seed)
        parser.add_argument(
            "--wrap-up-steps",
            type=int,
            default=Scenario.wrap_up_steps,
            help="model calls a run takes to finish once web_search is gone (an assumption)",
        )
        parser.add_argument(
            "--fleet-sync",
            choices=["push", "poll"],
            default="push",
            help="agents learn the fleet state by long-poll (push) or by polling only",
        )
        parser.add_argument(
            "--agent",
            choices=AGENTS,
            default="hand-written",
            help="who plays the runs: the hand-written agent, or the same scripted model through "
            "Pydantic AI and the SDK's integration (FunctionModel, offline)",
        )
        parser.add_argument(
            "--spend-amount",
            type=float,
            default=Scenario.spend_amount_usd,
            help="USD at which the fleet's spend rule opens web_search (0: off, the default)",
        )
        parser.add_argument(
            "--spend-window-minutes",
            type=float,
            default=Scenario.spend_window_s / 60,
            help="the spend rule's window, in simulated minutes",
        )
        parser.add_argument(
            "--failure",
            choices=["retryable", "semantic"],
            default=Scenario.failure_outcome,
            help="how the vendor fails: 503s after retries (the story) or a 400 to every call",
        )
        parser.add_argument(
            "--vendor-failure",
            choices=FAILURES,
            default="503",
            help="how the vendor fails: 503 after retries (the story), or 200 OK with no results",
        )
        parser.add_argument(
            "--exception-only",
            action="store_true",
            help="count only exceptions (result checks off), as breakers without them do",
        )
        parser.add_argument("--json", type=Path, help="write the per-mode figures here")
        parser.add_argument(
            "--print-server-env",
            action="store_true",
            help="print the control plane's settings for --speed (shell syntax) and exit",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["speed"] <= 0 or options["runs"] < 1 or options["workers"] < 1:
            raise CommandError("--speed, --runs and --workers must be positive")
        if options["wrap_up_steps"] < 1:
            raise CommandError("--wrap-up-steps must be at least 1")
        if options["vendor_failure"] != "503" and options["agent"] != "hand-written":
            raise CommandError("--vendor-failure empty is played by the hand-written agent only")
        if not 0 <= options["spend_amount"] <= 100_000 or not options["spend_window_minutes"] > 0:
            raise CommandError("--spend-amount must be 0-100000 and --spend-window-minutes > 0")
        if options["print_server_env"]:
            env = {**server_settings(speed=options["speed"]), **REPLAY_SERVER_SETTINGS}
            for name, value in env.items():
                self.stdout.write(f"export {name}={value}")
            return
        scenario = Scenario(
            wrap_up_steps=options["wrap_up_steps"],
            runs_in_window=options["runs"],
            workers=options["workers"],
            window_s=options["window_minutes"] * 60,
            baseline_runs=options["baseline_runs"],
            tail_runs=options["tail_runs"],
            seed=options["seed"],
            failure=options["vendor_failure"],
            exception_only=options["exception_only"],
            spend_amount_usd=options["spend_amount"],
            spend_window_s=options["spend_window_minutes"] * 60,
            failure_outcome=options["failure"],
        )
        modes = list(MODES) if options["mode"] == "all" else [options["mode"]]
        real_seconds = scenario.total_s / options["speed"] * len(modes)
        others = len(scenario.run_starts()) - scenario.runs_in_window
        self.stdout.write(
            f"Replaying {scenario.runs_in_window} runs in a {scenario.window_s / 60:g}-minute "
            f"outage ({others} more before and after it), modes {', '.join(modes)}, at "
            f"{options['speed']:g}x "
            f"(at least {real_seconds:.0f} s) against {options['url']}, agent "
            f"{options['agent']}; the model takes "
            f"{scenario.wrap_up_steps} step(s) to finish without web_search"
        )
        for warning in server_settings_warnings(speed=options["speed"]):
            self.stderr.write(f"warning: {warning}")
        progress = Progress(self.stdout.write, scenario=scenario)
        try:
            with stopped_as_interrupt():
                results = play_outage(
                    scenario=scenario,
                    modes=modes,
                    speed=options["speed"],
                    url=options["url"],
                    agent=options["agent"],
                    fleet_push=options["fleet_sync"] == "push",
                    on_run=progress.run_done,
                    on_mode=progress.mode_started,
                )
        except ReplayError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(format_table([result.figures for result in results]))
        for line in recovery_lines(results):
            self.stdout.write(line)
        for result in results:
            if "fleet_opened_s" not in result.figures:
                continue
            opened, rule = result.figures["fleet_opened_s"], result.figures["fleet_opened_by"]
            self.stdout.write(
                f"{result.mode}: the fleet breaker never opened web_search"
                if opened is None
                else f"{result.mode}: the fleet breaker opened web_search {opened:g} simulated s "
                f"after the outage began ({rule} rule)"
            )
        if options["json"]:
            figures = figures_json(scenario=scenario, agent=options["agent"], results=results)
            options["json"].write_text(json.dumps(figures, indent=2))
            self.stdout.write(f"wrote {options['json']}")


@contextmanager
def stopped_as_interrupt() -> Iterator[None]:
    """SIGTERM (``make demo``'s Ctrl-C handler stops the replay with it) raises in the main
    thread, as Ctrl-C does, so the replay playing marks itself interrupted before exiting."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def recovery_lines(results: Sequence[ReplayResult]) -> list[str]:
    """How each mode left web_search, in words: back for its agents (or not, and why), and
    closed in the fleet by a trial (or reset by the replay, and why)."""
    lines = []
    for result in results:
        figures = result.figures
        lag, extra = result.number("recovery_lag_s"), int(result.number("recovery_runs") or 0)
        more = f", {extra} run{'s' if extra != 1 else ''} after the story" if extra else ""
        agents = (
            f"back for the agents {lag:.0f} s after the vendor{more}"
            if lag is not None
            else f"never back for the agents: {figures.get('recovery_note') or 'no figure'}"
        )
        if figures.get("fleet_recovered"):
            fleet = "closed in the fleet, no incident open"
        else:
            fleet = (
                f"its fleet breaker did not close by itself ({figures.get('fleet_reset_reason')}); "
                "the replay reset it, which resolved its incident"
            )
        lines.append(f"{result.mode}: web_search {agents}; {fleet}")
    return lines


class Progress:
    """One line per mode every tenth of its outage-window runs: mode, those runs done (the
    figure the README, the table and the Outages page count), the runs before and after the
    outage done beside them, and real seconds elapsed."""

    def __init__(self, write: Any, *, scenario: Scenario) -> None:
        self.write = write
        self.scenario = scenario
        self.total = scenario.runs_in_window
        self.lock = threading.Lock()
        self.mode = ""
        self.done = 0
        self.others = 0
        self.started = time.monotonic()

    def mode_started(self, mode: str) -> None:
        with self.lock:
            self.mode, self.done, self.others, self.started = mode, 0, 0, time.monotonic()
        self.write(f"{mode}: started")

    def run_done(self, mode: str, record: RunRecord) -> None:
        with self.lock:
            if not self.scenario.vendor_is_down(record.started_s):
                self.others += 1
                return
            self.done += 1
            if self.done == self.total or self.done % max(1, self.total // 10) == 0:
                self.write(
                    f"  {mode}: {self.done}/{self.total} outage-window runs done "
                    f"({self.others} before or after it), "
                    f"{time.monotonic() - self.started:.0f} s elapsed"
                )
