"""Redis Cluster readiness: every fleet script call's keys hash to one slot, whatever the tool's
name (docs/operations.md). Checked on the real store against the test Redis, recording the keys
each script is called with; a live Redis Cluster is not run here."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.utils import timezone
from redis.commands.core import Script
from redis.crc import key_slot

from breakers.fleet_service import fleet_record_tool_calls, fleet_state, fleet_tick
from runs.fleet_interface import AcceptedToolCall

pytestmark = pytest.mark.django_db

NAMES = ["web_search", "a{b}c", "}{", "{", "weird/name with spaces", "ünïcode-tool"]


def test_each_script_call_touches_a_single_slot(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    original = Script.__call__

    def recording(self: Script, keys: Any = None, args: Any = None, client: Any = None) -> Any:
        calls.append([str(k) for k in keys or []])
        return original(self, keys=keys, args=args, client=client)

    monkeypatch.setattr(Script, "__call__", recording)
    fleet_state()
    now = timezone.now()
    for n, tool in enumerate(NAMES):
        batch = [
            AcceptedToolCall(f"e-{n}-{k}", now, f"w-{k % 2}", "r", tool, "retryable", 5, "503")
            for k in range(6)
        ]
        fleet_record_tool_calls(calls=batch)
    fleet_tick()

    assert len(calls) >= len(NAMES)
    for keys in calls:
        if keys:
            assert len({key_slot(key.encode()) for key in keys}) == 1, keys
