"""Ingest on SQLite, the demo's default database: the portable writer, in a process of its own
(the test session itself runs on PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import redis

from tests.sqlite_process import run_on_sqlite

SCRIPT = r"""
import json, django
django.setup()
from django.core.management import call_command
from django.test import Client
from runs.models import AgentToken, Run
call_command("migrate", verbosity=0)
_, raw = AgentToken.issue(name="demo")
ts = "2026-11-29T09:12:04Z"
events = [
    {"id": "e1", "type": "run.started", "ts": ts, "run_id": "r-1", "agent": "research"},
    {"id": "e2", "type": "tool.call", "ts": ts, "run_id": "r-1", "tool": "web_search",
     "outcome": "retryable", "attempts": 5, "error": "503"},
    {"id": "e3", "type": "model.call", "ts": ts, "run_id": "r-1", "input_tokens": 10,
     "output_tokens": 2, "cost_usd": 0.25},
    {"id": "e4", "type": "breaker.transition", "ts": ts, "scope": "worker", "tool": "web_search",
     "state": "open"},
    {"id": "e5", "type": "run.finished", "ts": "2026-11-29T09:12:06Z", "run_id": "r-1",
     "status": "completed", "degraded": True, "steps": 1},
    {"id": "e6", "type": "tool.call", "ts": ts, "run_id": "r-nope", "tool": "x",
     "outcome": "success"},
]
body = json.dumps({"worker_id": "w-1", "events": events, "dropped": {"id": "d1", "count": 3}})
client = Client()
replies = [
    client.post("/api/v1/events", data=body, content_type="application/json",
                HTTP_AUTHORIZATION="Bearer " + raw).json()
    for _ in range(3)
]
# A batch holding only a removal for a known run: what every SDK run sends when a fleet breaker
# opens mid-run (it was a KeyError in the portable writer).
removal = [{"id": "e7", "type": "breaker.transition", "ts": ts, "run_id": "r-1",
            "scope": "fleet", "tool": "web_search", "state": "open", "reason": "down"}]
removal_reply = client.post(
    "/api/v1/events", data=json.dumps({"worker_id": "w-1", "events": removal}),
    content_type="application/json", HTTP_AUTHORIZATION="Bearer " + raw,
)
run = Run.objects.get()
print(json.dumps({
    "removal": [removal_reply.status_code, removal_reply.json().get("accepted")],
    "replies": [[r["accepted"], r["duplicates"], len(r["rejected"])] for r in replies],
    "run": [run.status, run.tool_calls, run.tool_failures, str(run.model_spend_usd),
            run.duration_ms],
    "dropped": run.worker.dropped_events,
}))
"""


def test_ingest_works_on_sqlite(tmp_path: Path, redis_client: redis.Redis) -> None:
    result = run_on_sqlite(SCRIPT, tmp_path, timeout=120)
    assert result["replies"] == [[5, 0, 1], [0, 5, 1], [0, 5, 1]]
    assert result["run"] == ["completed", 1, 1, "0.250000", 2000]
    assert result["dropped"] == 3
    assert result["removal"] == [200, 1]
