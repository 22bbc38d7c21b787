"""``/healthz`` (the process answers) and ``/readyz`` (database, Redis, beat all working).

Every fleet tick (``breakers.fleet_tick``, sent by beat) first writes the time into Redis, so a
fresh heartbeat proves beat, the broker and a worker all run (and that the worker keeps up: a
tick that waited too long in the queue expires unrun). Both views are outside
``/api/`` and need no login; ``/readyz`` is for the platform's probes (HEALTH_ALLOWED_NETWORKS).
"""

from __future__ import annotations

import time
from typing import Any

import redis
from celery import shared_task
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from breakers.access.ops_endpoints import bearer_token_matches, client_in_networks, ops_redis

__all__ = (
    "BEAT_HEARTBEAT_KEY",
    "beat_heartbeat",
    "beat_heartbeat_age",
    "healthz",
    "readiness",
    "readyz",
    "write_beat_heartbeat",
)

BEAT_HEARTBEAT_KEY = "bp:health:beat"


def write_beat_heartbeat() -> None:
    ops_redis().set(BEAT_HEARTBEAT_KEY, repr(time.time()), ex=3600)


def beat_heartbeat_age() -> float | None:
    """Seconds since the last fleet tick wrote the heartbeat; None when there is none."""
    raw = ops_redis().get(BEAT_HEARTBEAT_KEY)
    return None if raw is None else max(0.0, time.time() - float(raw))


@shared_task(name="breakers.beat_heartbeat", ignore_result=True)
def beat_heartbeat() -> None:
    """The heartbeat as a task of its own, as beat sent it before the tick wrote it: kept for
    messages still queued by an older beat."""
    write_beat_heartbeat()


def readiness() -> tuple[bool, dict[str, str]]:
    """Each dependency's state in words, and whether all of them are fine."""
    checks: dict[str, str] = {}
    ok = True
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except DatabaseError as exc:
        ok, checks["database"] = False, f"error: {type(exc).__name__}"
    try:
        client = ops_redis()
        client.ping()
        checks["redis"] = "ok"
        raw = client.get(BEAT_HEARTBEAT_KEY)
    except redis.RedisError as exc:
        ok, checks["redis"] = False, f"error: {type(exc).__name__}"
        raw = None
    if checks["redis"] == "ok":
        if raw is None:
            ok, checks["beat"] = False, "no heartbeat yet (is celery beat running, and a worker?)"
        else:
            age = max(0.0, time.time() - float(raw))
            fresh = age <= settings.HEALTH_BEAT_MAX_AGE_SECONDS
            ok = ok and fresh
            checks["beat"] = f"{'ok' if fresh else 'stale'}: last heartbeat {age:.1f} s ago"
    return ok, checks


@login_not_required
@never_cache
@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


@login_not_required
@never_cache
@require_safe
def readyz(request: HttpRequest) -> HttpResponse:
    if not _may_read(request):
        return JsonResponse({"detail": "not allowed from this address"}, status=403)
    ok, checks = readiness()
    body: dict[str, Any] = {"status": "ready" if ok else "not ready", "checks": checks}
    return JsonResponse(body, status=200 if ok else 503)


def _may_read(request: HttpRequest) -> bool:
    return client_in_networks(request, settings.HEALTH_ALLOWED_NETWORKS) or bearer_token_matches(
        request, settings.METRICS_TOKEN
    )
