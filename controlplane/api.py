"""The one HTTP API (django-ninja) under ``/api/v1/``: the apps' routers and error handlers, the
JSON body parser, and the error replies every operation can give.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import re_path
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.errors import HttpError
from ninja.parser import Parser

from breakers.fleet_api import routes as fleet_api
from runs import api as ingest_api
from runs.replies import database_unavailable

__all__ = ("MAX_JSON_DEPTH", "BodyParser", "api")

# No request body of this API nests deeper than a few levels; anything deeper is refused before
# validation ever sees it (and a very deep one would exhaust the parser's recursion).
MAX_JSON_DEPTH = 32


class BodyRefused(Exception):
    """A JSON body ninja must not validate; ``status`` and ``detail`` are the reply."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _too_deep(data: Any, limit: int) -> bool:
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


class BodyParser(Parser):
    """JSON bodies of every ninja-parsed endpoint (not ``POST /events``, which parses its own):
    a reason for every refusal instead of ninja's bare "Cannot parse request body", and never a
    500 (too deep, too big, NaN/Infinity, not an object)."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        try:
            body = request.body
        except RequestDataTooBig as exc:
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            raise BodyRefused(413, f"the body is larger than {limit} bytes") from exc
        try:
            data = json.loads(body, parse_constant=_refuse_constant)
        except RecursionError as exc:
            raise BodyRefused(400, f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from exc
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
            raise BodyRefused(400, f"the body is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise BodyRefused(400, "the body must be a JSON object")
        if _too_deep(data, MAX_JSON_DEPTH):
            raise BodyRefused(400, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        return data


# The replies any operation can give besides its own, stated in the schema so that a client
# (and the fuzz pass, tests/fuzz) knows every status the server answers with.
_COMMON_ERRORS: dict[int, str] = {
    400: "The request is malformed (bad JSON, nested too deeply, not an object) or refused",
    401: "No valid bearer token",
    403: "The token is valid but may not do this (an operator action with an agent token, "
    "a session without its CSRF token)",
    404: "No such tool, or no such page",
    413: "The body is larger than the server accepts",
    422: "A field is missing, of the wrong type or out of its bounds; `detail` names each one",
    429: "Too many requests: retry after `Retry-After` seconds",
    503: "Redis or the database is unavailable: nothing was written, retry after `Retry-After`",
}
_RETRY_AFTER_STATUSES = frozenset({429, 503})
_ERROR_BODY = {
    "type": "object",
    "properties": {"detail": {"description": "Why: a message, or a list of field errors"}},
    "required": ["detail"],
}


def _with_common_errors(operation: dict[str, Any], *, has_path_params: bool) -> None:
    responses = operation.setdefault("responses", {})
    for status, description in _COMMON_ERRORS.items():
        if status == 404 and not has_path_params:
            continue
        key = str(status)
        if key in responses or status in responses:
            continue
        reply: dict[str, Any] = {
            "description": description,
            "content": {"application/json": {"schema": _ERROR_BODY}},
        }
        if status in _RETRY_AFTER_STATUSES:
            reply["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait before sending again",
                    "schema": {"type": "integer", "minimum": 0},
                }
            }
        responses[key] = reply


class ControlPlaneAPI(NinjaAPI):
    def get_openapi_schema(self, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(**kwargs)
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                if isinstance(operation, dict) and "responses" in operation:
                    _with_common_errors(operation, has_path_params="{" in path)
        return schema

    @property
    def urls(self) -> Any:
        patterns, app_name, namespace = super().urls
        # Last: a path no route matches (say a tool name holding a newline, which `path:` does
        # not match) gets a JSON 404 like every other API reply, not the site's HTML page.
        return [*patterns, re_path(r"^[\s\S]*$", _not_found)], app_name, namespace


@csrf_exempt  # else a POST to no route gets the CSRF middleware's HTML 403, not this JSON 404
def _not_found(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"detail": "Not Found: no such API path"}, status=404)


api = ControlPlaneAPI(
    title="Breaker Panel control plane",
    version="1",
    description="Agents report run events and read the fleet breaker state. See docs/api.md.",
    urls_namespace="api-v1",
    docs_url="/docs",
    parser=BodyParser(),
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


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # ninja wraps whatever the parser raises in HttpError(400, "Cannot parse request body").
    cause = exc.__cause__
    if isinstance(cause, BodyRefused):
        return JsonResponse({"detail": cause.detail}, status=cause.status)
    return JsonResponse({"detail": str(exc)}, status=exc.status_code)
