"""Check a replay's database against its tables and its incident pages against plain SQL.

    DATABASE_URL=sqlite:///$PWD/var/replay-agents/db.sqlite3 \\
        .venv/bin/python scripts/check_replay_pages.py

For every ``OutageReplay``: the runs started in its recorded outage window must be the table's
(runs, model calls, spend, degraded runs), and all its runs' ``web_search`` calls and attempts the
table's totals. For every incident opened during one: "runs affected" and vendor calls on its page
must equal counts written here in SQL. Prints one line each; exits 1 on any mismatch.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

import django

django.setup()

from django.db import connection  # noqa: E402
from django.db.models import Sum  # noqa: E402

from breakers.models import Incident  # noqa: E402
from controlplane.dashboard.incidents import incident_page  # noqa: E402
from runs.models import OutageReplay, Run, ToolCall  # noqa: E402

AFFECTED = """
    select count(*) from runs_run where id in (
        select run_id from runs_toolcall where tool = %s and ts >= %s and ts < %s
        union
        select run_id from runs_reportedtransition
        where tool = %s and state = 'open' and run_id is not null and ts >= %s and ts < %s)
"""
VENDOR = """
    select count(*), coalesce(sum(attempts), 0) from runs_toolcall
    where tool = %s and outcome != 'blocked' and ts >= %s and ts < %s
"""


def _one(sql: str, *args: object) -> tuple[int, ...]:
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        return tuple(cursor.fetchone())


def main() -> int:
    bad = 0
    for replay in OutageReplay.objects.order_by("started_at", "pk"):
        s = replay.summary if isinstance(replay.summary, dict) else {}
        runs = Run.objects.filter(worker__worker_id__startswith=replay.worker_prefix)
        window = runs.filter(
            started_at__gte=replay.outage_started_at, started_at__lt=replay.outage_ended_at
        )
        totals = window.aggregate(calls=Sum("model_calls"), spend=Sum("model_spend_usd"))
        searches = ToolCall.objects.filter(run__in=runs, tool="web_search").exclude(
            outcome="blocked"
        )
        pairs = {
            "runs": (s.get("runs"), window.count()),
            "model calls": (s.get("model_calls"), totals["calls"]),
            "spend": (round(s.get("model_spend_usd", 0), 2), round(float(totals["spend"] or 0), 2)),
            "degraded": (s.get("degraded_runs"), window.filter(degraded=True).count()),
            "search calls": (s.get("web_search_calls_total"), searches.count()),
            "attempts": (s.get("http_attempts"), searches.aggregate(n=Sum("attempts"))["n"]),
        }
        agent = (replay.scenario or {}).get("agent", "hand-written")
        wrong = [f"{k} {a} != {b}" for k, (a, b) in pairs.items() if a != b]
        bad += bool(wrong)
        print(f"{agent:12} {replay.mode:9} table = database: {'; '.join(wrong) or 'yes'}")
        end = replay.finished_at or replay.started_at
        for incident in Incident.objects.filter(
            opened_at__gte=replay.started_at, opened_at__lte=end
        ).select_related("tool", "opened_by", "closed_by"):
            page = incident_page(incident=incident)
            d, tool = page.comparison.during, incident.tool.name
            affected = _one(AFFECTED, tool, d.start, d.end, tool, d.start, d.end)[0]
            vendor = _one(VENDOR, tool, d.start, d.end)
            shown = (d.runs, d.vendor_calls, d.vendor_attempts)
            ok = shown == (affected, *vendor) and page.comparison.before.start >= replay.started_at
            bad += not ok
            print(
                f"  incident {incident.pk}: page runs/vendor calls/attempts {shown}, "
                f"SQL {(affected, *vendor)}, before from {page.comparison.before.start:%H:%M:%S}"
                f" {'ok' if ok else 'MISMATCH'}"
            )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
