"""The replay's progress counts the runs the README, the table and the Outages page count: the
340 of the outage window, with the runs before and after it beside them."""

from __future__ import annotations

from breakers.management.commands.simulate_outage import Progress
from breakers.replay.outage import RunRecord, Scenario


def test_progress_counts_the_outage_window_s_runs() -> None:
    lines: list[str] = []
    scenario = Scenario()
    progress = Progress(lines.append, scenario=scenario)
    progress.mode_started("fleet")
    for start in scenario.run_starts():
        progress.run_done("fleet", RunRecord(started_s=start))
    assert lines[-1].startswith("  fleet: 340/340 outage-window runs done (40 before or after")
    assert not any("/440" in line for line in lines)
