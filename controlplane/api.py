"""The one HTTP API (django-ninja) under ``/api/v1/``: the apps' routers and error handlers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from breakers import api as fleet_api
from runs import api as ingest_api
from runs.replies import database_unavailable

__all__ = ("api",)

api = NinjaAPI(
    title="Breaker Panel control plane",
    version="1",
    description="Agents report run events and read the fleet breaker state. See docs/api.md.",
    urls_namespace="api-v1",
    docs_url="/docs",
)
api.add_router("", ingest_api.router)
api.add_router("", fleet_api.router)
_HANDLERS: dict[type[Exception], Callable[[HttpRequest, Any], HttpResponse]] = {
    OperationalError: database_unavailable,
    InterfaceError: database_unavailable,
    **fleet_api.EXCEPTION_HANDLERS,
}
for _error, _handler in _HANDLERS.items():
    api.add_exception_handler(_error, _handler)
