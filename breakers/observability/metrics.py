"""``GET /metrics`` for Prometheus, behind METRICS_TOKEN or METRICS_ALLOWED_NETWORKS.

Web-process counters (``call_metrics``) are read from gunicorn's multiprocess directory
(PROMETHEUS_MULTIPROC_DIR). What Celery processes change (breaker states and transitions, alert
delivery) and what clients report (dropped events) is read from the database at scrape time, so
it is right whichever process made the change.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import Count, F, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Metric,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from breakers.access.ops_endpoints import bearer_token_matches, client_in_networks
from breakers.models import Alert, AlertState, FleetTransition, Tool
from breakers.observability.call_metrics import (
    INGEST_BATCH_SECONDS,
    count_ingest_batch,
    count_ingest_events,
)
from runs.api import INGEST_RESULT
from runs.models import BreakerState, Worker
from runs.services import IngestResult

__all__ = ("DatabaseCollector", "IngestMetricsMiddleware", "metrics")

INGEST_PATH = "/api/v1/events"


class DatabaseCollector(Collector):
    """Figures read from the database at scrape time (one small query each)."""

    def collect(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "resilience4j_circuitbreaker_state",
            "Fleet breaker state of each tool: 1 for its current state, 0 for the others",
            labels=["name", "state"],
        )
        for name, current in Tool.objects.values_list("name", "state"):
            for value in BreakerState.values:
                state.add_metric([name, value], 1.0 if value == current else 0.0)
        yield state

        transitions = CounterMetricFamily(
            "resilience4j_circuitbreaker_transitions",
            "Fleet breaker transitions of each tool, by the state entered",
            labels=["name", "to_state"],
        )
        rows = FleetTransition.objects.values_list("tool__name", "to_state").annotate(n=Count("id"))
        for name, to_state, n in rows:
            transitions.add_metric([name, to_state], n)
        yield transitions

        dropped = Worker.objects.aggregate(n=Sum("dropped_events"))["n"] or 0
        yield CounterMetricFamily(
            "breakerpanel_ingest_dropped_events",
            "Events agents dropped before sending (buffer full or refused), as they reported",
            value=dropped,
        )
        yield from _alert_metrics()


def _alert_metrics() -> Iterator[Metric]:
    figures = Alert.objects.aggregate(
        sent=Count("id", filter=Q(state=AlertState.SENT)),
        failed=Count("id", filter=Q(state=AlertState.FAILED)),
        retried=Sum(F("attempts") - 1, filter=Q(attempts__gt=1)),
    )
    yield CounterMetricFamily(
        "breakerpanel_alerts_sent", "Slack alerts delivered", value=figures["sent"] or 0
    )
    yield CounterMetricFamily(
        "breakerpanel_alerts_failed",
        "Slack alerts given up on (permanent error, broken channel, attempts used up)",
        value=figures["failed"] or 0,
    )
    yield CounterMetricFamily(
        "breakerpanel_alert_retries",
        "Delivery attempts after an alert's first one",
        value=figures["retried"] or 0,
    )


def _exposition() -> bytes:
    registry = CollectorRegistry()
    registry.register(DatabaseCollector())
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(REGISTRY) + generate_latest(registry)


@login_not_required
@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.METRICS_TOKEN
    if not (
        bearer_token_matches(request, token)
        or client_in_networks(request, settings.METRICS_ALLOWED_NETWORKS)
    ):
        response = HttpResponse("metrics need a bearer token or an allowed address\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(_exposition(), content_type=CONTENT_TYPE_LATEST)


class IngestMetricsMiddleware:
    """Times every ingest batch and counts its events by result, from the result the view left
    on the request (``runs.api.INGEST_RESULT``: no second parse of the reply)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method != "POST" or request.path_info != INGEST_PATH:
            return self.get_response(request)
        started = time.perf_counter()
        response = self.get_response(request)
        INGEST_BATCH_SECONDS.observe(time.perf_counter() - started)
        count_ingest_batch(response.status_code)
        if response.status_code == 200:
            result = getattr(request, INGEST_RESULT, None)
            if isinstance(result, IngestResult):
                count_ingest_events(
                    accepted=result.accepted,
                    duplicates=result.duplicates,
                    rejected=len(result.rejected),
                )
        return response
