"""Fleet endpoints under ``/api/v1/``: the fleet state, trial leases, and operator actions.

Thin handlers around ``breakers.fleet_service``. Operator actions take an operator token
(``OperatorAuth``) or a logged-in operator's session with its CSRF token (``OperatorSessionAuth``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import redis
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.http import parse_etags
from ninja import Field, Query, Router, Schema, Status
from ninja.errors import AuthorizationError, HttpError
from ninja.security import APIKeyCookie
from ninja.utils import check_csrf
from pydantic import ConfigDict, field_validator

from breakers import fleet_service
from breakers.access.operators import is_operator
from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_api.long_poll import FleetWatch
from breakers.models import (
    POLICY_BOUNDS,
    OperatorAction,
    ProbeKind,
    ProbeMethod,
    ToolPolicy,
    ms_to_datetime,
)
from breakers.slack.silences import NotSilencedError, end_silence
from runs.auth import AgentAuth, OperatorAuth
from runs.models import AgentToken
from runs.replies import service_unavailable
from runs.schemas import ErrorReply, FleetState, FleetTool, Identifier
from runs.services import TokenMismatch, check_bound_worker, fleet_lease_holder

router = Router(tags=["fleet"])

REDIS_UNAVAILABLE_RETRY_AFTER_S = 2


class OperatorSessionAuth(APIKeyCookie):
    """A logged-in operator: the session cookie plus Django's CSRF token (``X-CSRFToken``).

    Without a session cookie it steps aside (so a bad bearer token still gets 401, not a CSRF
    error); a logged-in user who is not an operator gets 403.
    """

    param_name = settings.SESSION_COOKIE_NAME

    def _get_key(self, request: HttpRequest) -> str | None:
        key = request.COOKIES.get(self.param_name)
        if key is not None and check_csrf(request) is not None:
            raise HttpError(403, "CSRF check failed: send the X-CSRFToken header")
        return key

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        if key is None or not request.user.is_authenticated:
            return None
        if not is_operator(request.user):
            raise AuthorizationError(message="only operators can act on breakers")
        return request.user


OPERATOR = [OperatorAuth(), OperatorSessionAuth()]


def _fleet_unavailable(request: HttpRequest, exc: redis.RedisError) -> HttpResponse:
    # Inside ingest's transaction the batch is rolled back; after it (the reply's fleet state)
    # the batch is kept. Either way resending it is safe: it is applied once.
    return service_unavailable(
        "the fleet store (Redis) is unavailable; retry later (a resent batch is applied once)",
        retry_after=REDIS_UNAVAILABLE_RETRY_AFTER_S,
    )


_ERROR_STATUS: dict[type[fleet_service.FleetError], int] = {
    fleet_service.UnknownToolError: 404,
    fleet_service.NotForcedError: 409,
    NotSilencedError: 409,
    fleet_service.FleetInputError: 400,
}


def _fleet_error(request: HttpRequest, exc: fleet_service.FleetError) -> HttpResponse:
    status = _ERROR_STATUS.get(type(exc), 400)
    return JsonResponse({"detail": str(exc)}, status=status)


# Registered on the API by controlplane.api.
EXCEPTION_HANDLERS: dict[type[Exception], Callable[[HttpRequest, Any], HttpResponse]] = {
    redis.RedisError: _fleet_unavailable,
    fleet_service.FleetError: _fleet_error,
}


class FleetToolOut(FleetTool):
    trial: str | None = Field(None, description="half_open only: 'probe' or 'lease'")


class FleetOut(FleetState):
    tools: dict[str, FleetToolOut]  # type: ignore[assignment]


def _current_fleet() -> tuple[str, fleet_service.FleetView | None]:
    """The fleet's ETag and state from Redis alone (no database): what the long-poll watcher
    compares, and hands to the requests it wakes so that each need not read Redis again."""
    generation, states = fleet_service.fleet_store().snapshot()
    if generation is None:
        return "", None  # lost: wake the waiters, whose own fleet_state() rebuilds it
    view = fleet_service.fleet_view(generation, states)
    return view.etag, view


FLEET_WATCH: FleetWatch[fleet_service.FleetView | None] = FleetWatch(
    _current_fleet,
    subscribe=(
        (lambda: fleet_service.fleet_store().subscribe_to_changes())
        if settings.BREAKER_FLEET_WATCH_ANNOUNCED
        else None
    ),
)


@router.get(
    "/fleet",
    # Operation ids as they were when this module was breakers/api.py: clients generate code
    # from them, so they do not follow the module's path.
    operation_id="breakers_api_get_fleet",
    auth=AgentAuth(),
    response={200: FleetOut, 304: None},
    summary="The fleet breaker state of every tool",
    description=(
        "Send the last `ETag` as `If-None-Match`: 304 while nothing changed. With `wait=N` "
        "(seconds) and a current ETag the answer is held until the fleet changes or N seconds "
        "pass (at most `BREAKER_FLEET_WAIT_MAX_SECONDS`); the `X-Fleet-Wait` header says how "
        "long the server was willing to wait, and its absence means: poll instead."
    ),
)
def get_fleet(
    request: HttpRequest, wait: float = Query(0.0, ge=0, le=3600, allow_inf_nan=False)
) -> HttpResponse:
    view = fleet_service.fleet_state()
    held = min(wait, settings.BREAKER_FLEET_WAIT_MAX_SECONDS)
    if held > 0 and view.etag in parse_etags(request.headers.get("If-None-Match", "")):
        # A held request must not hold a database connection too (the token check used one).
        if not connection.in_atomic_block:
            connection.close()
        changed = FLEET_WATCH.wait_for_change(
            view.etag, timeout=held, max_waiters=settings.BREAKER_FLEET_MAX_WAITERS
        )
        if changed is None:
            held = 0.0  # this process holds as many as it may: answer now, the agent polls
        elif changed:
            # The state the watcher read: fifty woken requests make no fifty Redis reads.
            view = FLEET_WATCH.latest(view.etag) or fleet_service.fleet_state()
    if view.etag in parse_etags(request.headers.get("If-None-Match", "")):
        response = HttpResponse(status=304)
    else:
        response = JsonResponse(view.as_json())
    response["ETag"] = view.etag
    response["Cache-Control"] = "no-cache"
    if held > 0:
        response["X-Fleet-Wait"] = f"{held:g}"
    return response


class TrialIn(Schema):
    worker_id: Identifier


class TrialOut(Schema):
    granted: bool
    window: int
    expires_at: datetime | None


@router.post(
    "/tools/{path:tool}/trial",
    operation_id="breakers_api_post_trial",
    auth=AgentAuth(),
    response={200: TrialOut, 403: ErrorReply, 404: ErrorReply},
    summary="Ask for the half-open trial of a tool without a probe",
    description=(
        "One worker at a time holds it: its next reported call of the tool decides (success "
        "closes the fleet breaker, a retryable failure re-opens it). `granted: false` means "
        "another worker holds it, or the tool is not half-open."
    ),
)
def post_trial(request: HttpRequest, tool: str, body: TrialIn) -> Any:
    token = request.auth  # type: ignore[attr-defined]
    try:
        check_bound_worker(token=token, worker_id=body.worker_id)
    except TokenMismatch as exc:
        return Status(403, {"detail": exc.detail})
    # The worker holds the lease, not its token's vote: workers sharing a token get one trial.
    holder = fleet_lease_holder(worker_id=body.worker_id, token=token)
    grant = fleet_service.fleet_trial_acquire(tool_name=tool, worker_id=holder)
    expires = ms_to_datetime(grant.lease_until) if grant.granted else None
    return {"granted": grant.granted, "window": grant.window, "expires_at": expires}


# A reason must hold something printable and no NUL (PostgreSQL text cannot store it): the
# server strips it (str.strip) and refuses an empty one with 400. The class is \s plus what
# Python counts as space and ECMA regexes do not.
_REASON_PATTERN = r"^[^\x00]*[^\s\x00\x1c-\x1f\x85][^\x00]*$"
# What the model's fields can hold: no control characters in a URL, a dotted Python path.
_PROBE_URL_PATTERN = r"^$|^(https?|ftps?)://[^\x00-\x20\x7f]*$"
_DOTTED_PATH_PATTERN = r"^$|^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"


class ReasonIn(Schema):
    reason: str = Field(
        ...,
        max_length=fleet_service.MAX_REASON_CHARS,
        json_schema_extra={"minLength": 1, "pattern": _REASON_PATTERN},
    )


class ActionOut(Schema):
    id: int
    tool: str
    action: str
    state: str
    reason: str
    actor: str
    at: datetime
    before: dict[str, Any]
    after: dict[str, Any]


def _action_out(row: OperatorAction) -> dict[str, Any]:
    return {
        "id": row.pk,
        "tool": row.tool.name,
        "action": row.action,
        "state": row.after["state"],
        "reason": row.reason,
        "actor": row.actor,
        "at": row.at,
        "before": row.before,
        "after": row.after,
    }


def _add_operator_route(action: OperatorActionKind, slug: str, summary: str) -> None:
    def handler(request: HttpRequest, tool: str, body: ReasonIn) -> Any:
        actor = request.auth  # type: ignore[attr-defined]
        row = fleet_service.fleet_operator_action(
            tool_name=tool,
            action=action,
            reason=body.reason,
            token=actor if isinstance(actor, AgentToken) else None,
            user=None if isinstance(actor, AgentToken) else actor,
        )
        return _action_out(row)

    router.post(
        f"/tools/{{path:tool}}/{slug}",
        auth=OPERATOR,
        response={200: ActionOut, 400: ErrorReply, 404: ErrorReply, 409: ErrorReply},
        summary=summary,
        operation_id=f"fleet_{action.value}",
        url_name=f"fleet-{slug}",
    )(handler)


for _action, _slug, _summary in (
    (OperatorActionKind.FORCE_OPEN, "force-open", "Kill switch: take the tool out of every run"),
    (
        OperatorActionKind.FORCE_CLOSE,
        "force-close",
        "Keep the tool available whatever breakers say",
    ),
    (OperatorActionKind.RELEASE, "release", "Back to the automatic breaker"),
    (OperatorActionKind.RESET, "reset", "Clear the automatic breaker's counters (closes it)"),
):
    _add_operator_route(_action, _slug, _summary)


class SilenceOut(Schema):
    id: int
    tool: str
    set_by: str
    set_at: datetime
    until: datetime | None = Field(description="null: it held alerts until its incident recovered")
    ended_at: datetime
    ended_by: str


@router.post(
    "/tools/{path:tool}/unsilence",
    auth=OPERATOR,
    response={200: SilenceOut, 404: ErrorReply, 409: ErrorReply},
    summary="End the tool's alert silence (set from Slack) early, audited",
    operation_id="fleet_unsilence",
    url_name="fleet-unsilence",
)
def unsilence(request: HttpRequest, tool: str) -> Any:
    actor = request.auth  # type: ignore[attr-defined]
    row = end_silence(
        tool=fleet_service.existing_tool(tool),
        token=actor if isinstance(actor, AgentToken) else None,
        user=None if isinstance(actor, AgentToken) else actor,
        where="API",
    )
    return {
        "id": row.pk,
        "tool": row.tool.name,
        "set_by": row.set_by,
        "set_at": row.set_at,
        "until": row.until,
        "ended_at": row.ended_at,
        "ended_by": row.ended_by,
    }


def _bounded(field: str) -> Any:
    """A policy number's pydantic field: its bounds (``POLICY_BOUNDS``) in the 422 and schema."""
    low, high = POLICY_BOUNDS[field]
    return Field(None, ge=low, le=high, allow_inf_nan=False)


class PolicyIn(Schema):
    """Only the fields sent change; null puts a field back to the settings default."""

    model_config = ConfigDict(extra="forbid")

    threshold: int | None = _bounded("threshold")
    cooldown_seconds: float | None = _bounded("cooldown_seconds")
    max_cooldown_seconds: float | None = _bounded("max_cooldown_seconds")
    min_workers: int | None = _bounded("min_workers")
    spend_amount_usd: float | None = _bounded("spend_amount_usd")
    spend_window_seconds: float | None = _bounded("spend_window_seconds")
    probe_kind: ProbeKind | None = None
    probe_url: str | None = Field(
        None,
        max_length=ToolPolicy._meta.get_field("probe_url").max_length,
        pattern=_PROBE_URL_PATTERN,
    )
    probe_method: ProbeMethod | None = None
    probe_expected_status: int | None = _bounded("probe_expected_status")
    probe_timeout_seconds: float | None = _bounded("probe_timeout_seconds")
    probe_callable: str | None = Field(
        None,
        max_length=ToolPolicy._meta.get_field("probe_callable").max_length,
        pattern=_DOTTED_PATH_PATTERN,
    )

    @field_validator(
        "threshold",
        "cooldown_seconds",
        "max_cooldown_seconds",
        "min_workers",
        "spend_amount_usd",
        "spend_window_seconds",
        "probe_expected_status",
        "probe_timeout_seconds",
        mode="before",
    )
    @classmethod
    def _not_a_boolean(cls, value: Any) -> Any:
        # JSON true/false is not a number: pydantic would read it as 1/0 (and false passes a
        # lower bound of 0, as the spend amount's is).
        if isinstance(value, bool):
            raise ValueError("a number, not true or false")
        return value


# Fields whose empty value is "" or a fixed default rather than None in the database.
_POLICY_BLANKS: dict[str, Any] = {
    "probe_kind": "",
    "probe_url": "",
    "probe_callable": "",
    "probe_method": ProbeMethod.GET,
    "probe_expected_status": 200,
    "probe_timeout_seconds": 5.0,
}


@router.put(
    "/tools/{path:tool}/policy",
    operation_id="breakers_api_put_policy",
    auth=OPERATOR,
    response={200: dict[str, Any], 400: dict[str, Any], 404: ErrorReply},
    summary="Change a tool's policy (threshold, cooldown, min workers, probe)",
)
def put_policy(request: HttpRequest, tool: str, body: PolicyIn) -> Any:
    changes = {
        name: _POLICY_BLANKS.get(name) if value is None else value
        for name, value in body.model_dump(exclude_unset=True).items()
    }
    actor = request.auth  # type: ignore[attr-defined]
    label = f"token:{actor.name}" if isinstance(actor, AgentToken) else f"user:{actor}"
    try:
        fleet_service.tool_policy_update(tool_name=tool, changes=changes, actor=label)
    except ValidationError as exc:
        return Status(400, {"detail": "invalid policy", "errors": exc.message_dict})
    return fleet_service.fleet_tool_details(tool_name=tool)


# Last: its pattern would also match the longer paths above (a tool name may contain '/').
@router.get(
    "/tools/{path:tool}",
    operation_id="breakers_api_get_tool",
    auth=OPERATOR,
    response={200: dict[str, Any], 404: ErrorReply},
    summary="One tool's live fleet breaker: streak, workers, policy",
)
def get_tool(request: HttpRequest, tool: str) -> Any:
    return fleet_service.fleet_tool_details(tool_name=tool)
