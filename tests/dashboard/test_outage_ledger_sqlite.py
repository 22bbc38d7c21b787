"""The outage ledgers on SQLite, the demo's default database, in a process of its own (the test
session runs on PostgreSQL): the batched SQL gives every figure it gives on PostgreSQL. Its first
version asked SQLite for ``STDDEV_SAMP``, which only Django's Python stand-in provides, and that
fails on NULLs: the Outages page, incident pages and the Slack ledgers were a 500 there."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from breakers.alerts.ledger import incident_ledgers
from breakers.models import Incident
from tests.dashboard.test_outage_ledger_queries import _incidents
from tests.sqlite_process import run_on_sqlite

pytestmark = pytest.mark.django_db

FIGURES = r"""
def figures(ledgers):
    from dataclasses import asdict
    from datetime import datetime
    from decimal import Decimal
    def plain(value):
        if isinstance(value, Decimal):
            return f"{value:.6f}"
        if isinstance(value, float):
            return round(value, 6)
        if isinstance(value, datetime):
            return None
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value
    return [plain(asdict(ledger)) for ledger in ledgers]
"""

SCRIPT = (
    FIGURES
    + r"""
import json, django
django.setup()
from django.core.management import call_command
from django.test import Client
from django.contrib.auth.models import User
call_command("migrate", verbosity=0)
from breakers.alerts.ledger import incident_ledgers
from breakers.models import Incident
from tests.dashboard.test_outage_ledger_queries import _incidents
_incidents(4)
incidents = list(Incident.objects.select_related("tool", "opened_by").order_by("tool__name"))
client = Client()
client.force_login(User.objects.create_superuser("admin", "a@example.org", "pw"))
pages = [client.get("/outages/").status_code]
print(json.dumps({"ledgers": figures(incident_ledgers(incidents)), "pages": pages}))
"""
)


def test_the_ledgers_on_sqlite_are_the_ones_on_postgresql(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    result = run_on_sqlite(SCRIPT, tmp_path, timeout=180)
    assert result["pages"] == [200]

    _incidents(4)
    incidents = list(Incident.objects.select_related("tool", "opened_by").order_by("tool__name"))
    namespace: dict[str, object] = {}
    exec(FIGURES, namespace)  # the same conversion on both sides
    here = namespace["figures"](incident_ledgers(incidents))  # type: ignore[operator]
    # The open incident's figures run to "now", a few seconds apart here: floats to 1e-4.
    for sqlite, postgresql in zip(result["ledgers"], here, strict=True):
        assert sqlite.keys() == postgresql.keys()
        for key, value in postgresql.items():
            if isinstance(value, float):
                assert sqlite[key] == pytest.approx(value, rel=1e-4), key
            else:
                assert sqlite[key] == value, key
    # The measured estimate (five failing runs kept the tool) has its spread on both backends.
    assert any(ledger.get("avoided_low_usd") is not None for ledger in here)
