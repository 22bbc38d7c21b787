"""``python manage.py replay_ways``: the outage replay with prompt caching on, per provider shape,
mode and way of taking the tool away (``breakers/replay/ways_matrix.py``)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from breakers.management.commands.simulate_outage import stopped_as_interrupt
from breakers.replay.outage import (
    MODES,
    REPLAY_WAYS,
    ReplayError,
    Scenario,
    assumptions,
    cheapest_ways,
    format_ways_table,
    play_and_record_ways,
    server_settings_warnings,
)

PROVIDERS = ("anthropic", "openai")
WAYS = REPLAY_WAYS  # remove, restrict, refuse and the SDK's default


class Command(BaseCommand):
    help = (
        "Replay the search-vendor outage with prompt caching on: every mode against an "
        "Anthropic-shaped and an OpenAI-shaped model, run/worker/fleet once per way of taking "
        "the tool away; print spend, cached-input share and hidden-tool calls."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--provider", nargs="+", choices=PROVIDERS, default=list(PROVIDERS))
        parser.add_argument("--mode", nargs="+", choices=MODES, default=list(MODES))
        parser.add_argument(
            "--way",
            nargs="+",
            choices=WAYS,
            default=list(WAYS),
            help="ways of taking the tool away; 'default' is the SDK's choice when none is named",
        )
        parser.add_argument("--speed", type=float, default=60.0, help="time compression factor")
        parser.add_argument("--url", default=settings.SITE_URL, help="the control plane's URL")
        parser.add_argument("--runs", type=int, default=340, help="runs started in the window")
        parser.add_argument("--seed", type=int, default=Scenario.seed)
        parser.add_argument(
            "--ignores-notice",
            type=float,
            default=Scenario.ignores_notice_probability,
            help="share of steps on which the model asks for a tool the notice says is gone "
            "while it is still in its tools array (an assumption)",
        )
        parser.add_argument("--json", type=Path, help="write the rows and verdicts here")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["speed"] <= 0 or options["runs"] < 1:
            raise CommandError("--speed and --runs must be positive")
        if not 0 <= options["ignores_notice"] <= 1:
            raise CommandError("--ignores-notice is a share between 0 and 1")
        scenario = Scenario(
            runs_in_window=options["runs"],
            seed=options["seed"],
            ignores_notice_probability=options["ignores_notice"],
        )
        chosen = {name: list(dict.fromkeys(options[name])) for name in ("provider", "mode", "way")}
        for warning in server_settings_warnings(speed=options["speed"]):
            self.stderr.write(f"warning: {warning}")
        try:
            # SIGTERM raises as Ctrl-C does, so the record is marked interrupted before exiting.
            with stopped_as_interrupt():
                record, rows = play_and_record_ways(
                    scenario=scenario,
                    url=options["url"],
                    speed=options["speed"],
                    providers=chosen["provider"],
                    modes=chosen["mode"],
                    ways=chosen["way"],
                    on_play=lambda p, m, w: self.stdout.write(
                        f"playing {p} {m} {w or ''}".rstrip()
                    ),
                )
        except ReplayError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(format_ways_table(rows))
        self.stdout.write("Assumptions:")
        for line in assumptions(scenario):
            self.stdout.write(f"- {line}")
        if options["json"]:
            figures = {
                "scenario": {k: str(v) for k, v in asdict(scenario).items()},
                "speed": options["speed"],
                "assumptions": assumptions(scenario),
                "rows": rows,
                "verdicts": cheapest_ways(rows),
            }
            options["json"].write_text(json.dumps(figures, indent=2))
            self.stdout.write(f"wrote {options['json']}")
        self.stdout.write(f"recorded as ways replay #{record.pk} (the Outages page shows it)")
