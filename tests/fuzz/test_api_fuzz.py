"""Schemathesis over the API's own OpenAPI schema: no input makes a server error, and every reply
is one the schema declares (status, content type, body shape).

``make test`` runs a short pass (``BP_FUZZ_EXAMPLES`` examples per operation, default 10);
``make fuzz`` runs the long one CI runs (default 150 per operation, a few minutes). The requests
go through Django's WSGI handler in this process, against the real PostgreSQL and Redis, with an
operator token (operator tokens are agent tokens too). Half the cases name a tool the fleet
knows, so the fuzz reaches the policy, operator and trial code rather than only 404s.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.case import Case
from schemathesis.schemas import BaseSchema
from schemathesis.specs.openapi.checks import (
    negative_data_rejection,
    positive_data_acceptance,
)

from breakers.fleet_service import fleet_rebuild
from breakers.models import Tool
from controlplane.api import api
from runs.models import AgentToken

EXAMPLES = int(os.environ.get("BP_FUZZ_EXAMPLES", "10"))
KNOWN_TOOLS = ("web_search", "get_weather", "a/b tool")
_tokens: dict[str, str] = {}


def _load_schema() -> BaseSchema:
    # The served schema is for logged-in people (behind the dashboard's login wall); this is the
    # same document, and the requests go to the same WSGI application.
    api.urls  # noqa: B018 (mounts the routers, as the URLconf does)
    loaded = schemathesis.openapi.from_dict(dict(api.get_openapi_schema(path_prefix="/api/v1/")))
    loaded.app = get_wsgi_application()
    return loaded


schema = _load_schema()


@pytest.fixture(autouse=True)
def fleet_with_tools(db: None, fleet_redis: Any) -> Iterator[None]:
    # As Django's test client does: a request must not close the test's database connection.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    for name in KNOWN_TOOLS:
        Tool.objects.get_or_create(name=name)
    fleet_rebuild()
    _tokens["operator"] = AgentToken.issue(name="fuzz-operator", is_operator=True)[1]
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def _aim_at_known_tools(case: Case) -> None:
    params = case.path_parameters
    if params and "tool" in params:
        pick = zlib.crc32(repr(sorted(params.items())).encode()) % (2 * len(KNOWN_TOOLS))
        if pick < len(KNOWN_TOOLS):
            params["tool"] = KNOWN_TOOLS[pick]


def _negative(case: Case, location: ParameterLocation) -> bool:
    info = case.meta.components.get(location) if case.meta else None
    return bool(info and info.mode.is_negative)


def _operator_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {_tokens['operator']}"}


@schema.parametrize()
@pytest.mark.timeout(900)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_input_makes_a_server_error_and_every_reply_is_in_the_schema(case: Case) -> None:
    _aim_at_known_tools(case)
    # A valid token replaces the generated one, except where the headers are the negative part
    # of the case: then the generated (missing or malformed) Authorization goes as it is, and
    # the check is that it is refused.
    headers = {} if _negative(case, ParameterLocation.HEADER) else _operator_headers()
    excluded = []
    if case.operation.path == "/api/v1/events":
        # By design a batch is checked event by event: an invalid event comes back in
        # `rejected` of a 200 while the valid ones are kept (docs/api.md), so a schema-violating
        # event is not a schema-violating request. The ingest's own schema is being reworked
        # (issue 10): it still allows what its parser refuses (an integer-valued float count).
        excluded += [negative_data_rejection, positive_data_acceptance]
    if case.operation.path == "/api/v1/tools/{tool}/policy":
        # Cross-field rules JSON Schema cannot state answer 400 naming the field: cooldown <=
        # max cooldown, an HTTP probe needs a valid URL, a callable must import from an
        # allowed prefix.
        excluded.append(positive_data_acceptance)
    case.call_and_validate(headers=headers, excluded_checks=excluded)
