"""The API's OpenAPI operation ids do not follow where its code lives: clients generate code from
them, and they stayed the same when ``breakers/api.py`` became ``breakers/fleet_api/routes.py``."""

from __future__ import annotations

from controlplane.api import api


def test_the_fleet_operations_keep_their_ids() -> None:
    schema = api.get_openapi_schema(path_prefix="/api/v1/")
    ids = {
        operation["operationId"]
        for path in schema["paths"].values()
        for operation in path.values()
        if isinstance(operation, dict)
    }
    assert ids == {
        "breakers_api_get_fleet",
        "breakers_api_get_tool",
        "breakers_api_post_trial",
        "breakers_api_put_policy",
        "fleet_force_close",
        "fleet_force_open",
        "fleet_release",
        "fleet_reset",
        "fleet_unsilence",
        "runs_api_post_events",
    }
