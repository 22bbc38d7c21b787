"""Dashboard pages: thin function views over the read functions of this app and the fleet
services of ``breakers.fleet_service``.

Login is enforced for every page by ``controlplane.middleware.LoginRequiredMiddleware``; acting on a
breaker needs an operator (``operator_required``), whatever the page showed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import urlencode

import redis
from django import forms
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import parse_etags
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import (
    HttpResponseClientRedirect,
    HttpResponseClientRefresh,
    trigger_client_event,
)

from breakers.access.operators import is_operator, operator_required
from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import (
    FleetInputError,
    NotForcedError,
    UnknownToolError,
    fleet_operator_action,
    tool_policy_update,
)
from breakers.models import AlertState, Incident, OperatorAction, SlackUser, Tool
from breakers.slack.linking import LinkError, SlackIdentity, link_slack_user, read_link_token
from breakers.slack.silences import NotSilencedError, end_silence
from controlplane.dashboard.alerts_page import alerts_page
from controlplane.dashboard.board import (
    ACTIVE_RUN_WINDOW,
    WORKER_LIVE_WINDOW,
    BoardFilters,
    StateFilter,
    board_etag,
    fleet_board,
)
from controlplane.dashboard.economics import incident_charts, outages_page
from controlplane.dashboard.forms import (
    ACTION_HELP,
    ACTION_LABELS,
    AuditFilterForm,
    BoardFilterForm,
    IncidentFilterForm,
    OperatorActionForm,
    PolicyForm,
    RunFilterForm,
)
from controlplane.dashboard.http import HtmxHttpRequest, render_page
from controlplane.dashboard.incidents import IncidentFilters, incident_page, incidents_page
from controlplane.dashboard.ledgers import ledger_summary
from controlplane.dashboard.queries import (
    AuditFilters,
    RunFilters,
    audit_page,
    measure_replay_runs,
    run_timeline,
    runs_page,
    with_replay,
)
from controlplane.dashboard.replay_banner import playing_replay
from controlplane.dashboard.replay_findings import incident_findings, replay_findings
from controlplane.dashboard.tool_page import tool_page
from controlplane.dashboard.ways import ways_section
from runs.cache_rules import cache_rules_for_models
from runs.models import Run

# The htmx event that makes the board poll at once (an operator just acted).
FLEET_CHANGED_EVENT = "fleet-changed"
MAX_RULE_MODELS = 20  # models of one run whose provider's caching rule is shown
REDIS_DOWN_MESSAGE = (
    "The fleet store (Redis) cannot be reached, so nothing was changed. Try again in a moment; "
    "if it lasts, use the operator API once Redis is back."
)


# -- board ----------------------------------------------------------------------------------


@require_GET
def board(request: HtmxHttpRequest) -> HttpResponse:
    form = BoardFilterForm(request.GET)
    valid = form.is_valid()
    data = form.cleaned_data if valid else {}
    filters = BoardFilters(state=StateFilter(data.get("state") or ""), q=data.get("q") or "")
    operator = is_operator(request.user)
    snapshot = fleet_board(filters=filters)
    polling = bool(request.htmx) and not request.htmx.history_restore_request
    etag = board_etag(snapshot, filters=filters, variant="operator" if operator else "viewer")
    if polling and valid and etag in parse_etags(request.headers.get("If-None-Match", "")):
        # Nothing the board shows has changed: no rendering, an empty answer, htmx keeps it.
        response = HttpResponse(status=304)
    else:
        context = {
            "nav": "board",
            "form": form,
            "filters": filters,
            "board": snapshot,
            "is_operator": operator,
            "poll_url": _board_url(filters),
            "poll_headers": json.dumps({"If-None-Match": etag}),
            "worker_live_minutes": round(WORKER_LIVE_WINDOW.total_seconds() / 60),
            "active_run_hours": round(ACTIVE_RUN_WINDOW.total_seconds() / 3600),
            "replay": playing_replay(),
        }
        response = render_page(request, "dashboard/board.html", context, partial="board-live")
        response.status_code = 200 if valid else 400
    if polling:
        response["ETag"] = etag
    # Revalidate every time (the board is live), and keep it out of shared caches.
    response["Cache-Control"] = "no-cache, private"
    patch_vary_headers(response, ("HX-Request", "Cookie"))
    return response


def _board_url(filters: BoardFilters) -> str:
    """The board with these filters: what the live region polls."""
    query = urlencode({k: v for k, v in (("q", filters.q), ("state", filters.state)) if v})
    return reverse("dashboard:board") + (f"?{query}" if query else "")


# -- tools ----------------------------------------------------------------------------------


def _tool_or_404(pk: int) -> Tool:
    return get_object_or_404(Tool.objects.select_related("policy"), pk=pk)


@require_GET
def tool_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    tool = _tool_or_404(pk)
    return _render_tool(request, tool, PolicyForm(initial=_policy_initial(tool)))


def _render_tool(
    request: HtmxHttpRequest, tool: Tool, policy_form: PolicyForm, *, status: int = 200
) -> HttpResponse:
    page = tool_page(tool=tool)
    context = {
        "nav": "board",
        "page": page,
        "tool": tool,
        "is_operator": is_operator(request.user),
        "action_form": OperatorActionForm(initial={"next": "tool"}),
        "action_help": ACTION_HELP,
        "policy_form": policy_form,
    }
    response = render_page(request, "dashboard/tool_detail.html", context)
    response.status_code = status
    return response


def _policy_initial(tool: Tool) -> dict[str, Any]:
    policy = getattr(tool, "policy", None)
    if policy is None:
        return {}
    return {name: getattr(policy, name) for name in PolicyForm.base_fields}


@require_http_methods(["GET", "POST"])
@operator_required
def tool_action(request: HtmxHttpRequest, pk: int) -> HttpResponseBase:
    """Force open, force close, release or reset one tool, with a required reason."""
    tool = _tool_or_404(pk)
    if request.method == "GET":
        initial = {"next": request.GET.get("next", "board")}
        if request.GET.get("action") in ACTION_HELP:
            initial["action"] = request.GET["action"]
        return _action_form(request, tool, OperatorActionForm(initial=initial))
    form = OperatorActionForm(request.POST)
    if not form.is_valid():
        return _action_form(request, tool, form, status=400)
    try:
        row = fleet_operator_action(
            tool_name=tool.name,
            action=OperatorActionKind(form.cleaned_data["action"]),
            reason=form.cleaned_data["reason"],
            user=cast(User, request.user),  # operator_required: signed in
        )
    except UnknownToolError as exc:
        raise Http404(str(exc)) from exc
    except NotForcedError as exc:
        form.add_error("action", str(exc))
        return _action_form(request, tool, form, status=409)
    except FleetInputError as exc:
        form.add_error("reason", str(exc))
        return _action_form(request, tool, form, status=400)
    except redis.RedisError:
        form.add_error(None, REDIS_DOWN_MESSAGE)
        return _action_form(request, tool, form, status=503)
    return _acted(request, tool, row, back_to_tool=form.cleaned_data.get("next") == "tool")


def _acted(
    request: HtmxHttpRequest, tool: Tool, row: OperatorAction, *, back_to_tool: bool
) -> HttpResponseBase:
    """After an action: the board shows the outcome in its panel and polls at once; the tool
    page (and any page without htmx) reloads with a message."""
    if request.htmx and not back_to_tool:
        context = {"tool": tool, "done": row, "nav": "board"}
        template = "dashboard/tool_action.html"
        response = render_page(request, template, context, partial="action-panel")
        return trigger_client_event(response, FLEET_CHANGED_EVENT)
    state = str(row.after.get("state", "?")).replace("_", " ")
    messages.success(request, f"{ACTION_LABELS[row.action]} of {tool.name}: now {state}.")
    if request.htmx:
        return HttpResponseClientRefresh()
    url = reverse("dashboard:tool", args=[tool.pk]) if back_to_tool else reverse("dashboard:board")
    return HttpResponseRedirect(url, status=303)


def _action_form(
    request: HtmxHttpRequest, tool: Tool, form: OperatorActionForm, *, status: int = 200
) -> HttpResponse:
    context = {"tool": tool, "form": form, "action_help": ACTION_HELP, "nav": "board"}
    response = render_page(request, "dashboard/tool_action.html", context, partial="action-panel")
    response.status_code = status
    return response


@require_http_methods(["POST"])
@operator_required
def tool_policy(request: HtmxHttpRequest, pk: int) -> HttpResponseBase:
    tool = _tool_or_404(pk)
    form = PolicyForm(request.POST)
    if form.is_valid():
        try:
            tool_policy_update(
                tool_name=tool.name,
                changes=form.cleaned_data,
                actor=f"user:{request.user.get_username()}",
            )
        except ValidationError as exc:
            for name, errors in exc.message_dict.items():
                form.add_error(name if name in form.fields else None, errors)
        except redis.RedisError:
            form.add_error(None, REDIS_DOWN_MESSAGE)
        except (UnknownToolError, FleetInputError) as exc:
            form.add_error(None, str(exc))
    if form.errors:
        return _render_tool(request, _tool_or_404(pk), form, status=400)
    messages.success(request, f"Policy of {tool.name} saved.")
    return HttpResponseRedirect(reverse("dashboard:tool", args=[tool.pk]) + "#policy", status=303)


@require_http_methods(["POST"])
@operator_required
def tool_unsilence(request: HtmxHttpRequest, pk: int) -> HttpResponseBase:
    """End the tool's silence (the one the page showed) early; one that has already ended is
    told, not an error."""
    tool = _tool_or_404(pk)
    raw = request.POST.get("silence", "")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
        messages.error(request, "That form does not name a silence; nothing was changed.")
    else:
        try:
            end_silence(
                tool=tool,
                silence_id=int(raw),
                user=cast(User, request.user),  # operator_required: signed in
                where="tool page",
            )
        except NotSilencedError as exc:
            messages.info(request, str(exc))
        else:
            messages.success(request, f"The silence of {tool.name} has ended: alerts resume.")
    url = reverse("dashboard:tool", args=[tool.pk]) + "#silence"
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return HttpResponseRedirect(url, status=303)


# -- incidents, audit -------------------------------------------------------------------------


@require_GET
def incidents(request: HtmxHttpRequest) -> HttpResponse:
    def page_of(data: dict[str, Any], page: int) -> tuple[IncidentFilters, Any]:
        filters = IncidentFilters(tool=data["tool"], status=data["status"])
        return filters, incidents_page(filters=filters, page=page)

    form = IncidentFilterForm(request.GET)
    return _filtered_list(
        request, form, IncidentFilters(), page_of, nav="incidents", template="incidents"
    )


@require_GET
def incident_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(
        Incident.objects.select_related("tool", "opened_by", "closed_by"), pk=pk
    )
    page = incident_page(incident=incident)
    charts = incident_charts(incident=incident, now=page.end, window=page.window)
    context = {
        "nav": "incidents",
        "page": page,
        "charts": charts,
        "findings": incident_findings(
            during=page.comparison.during,
            before=page.comparison.before,
            spend_during=charts.during,
            spend_before=charts.baseline,
        ),
    }
    return render_page(request, "dashboard/incident_detail.html", context)


@require_GET
def replay_banner(request: HtmxHttpRequest) -> HttpResponse:
    """The board's "a replay is playing" banner, polled on its own (empty when none is)."""
    context = {"replay": playing_replay()}
    return render_page(request, "dashboard/_replay_banner.html", context)


@require_GET
def outages(request: HtmxHttpRequest) -> HttpResponse:
    """Replays of ``simulate_outage``: each breaker mode's duration and spend, side by side; and
    the newest ``replay_ways`` record: each way of taking the tool away, with prompt caching."""
    raw, raw_ways = request.GET.get("batch", ""), request.GET.get("ways", "")
    bad = next((value for value in (raw, raw_ways) if value and not _is_key(value)), None)
    if bad is not None:
        context = {"nav": "outages", "page": outages_page(compare=False), "error": bad}
        response = render_page(request, "dashboard/outages.html", context)
        response.status_code = 400
        return response
    try:
        page = outages_page(batch_key=int(raw) if raw else None)
        ways = ways_section(record_key=int(raw_ways) if raw_ways else None)
    except LookupError as exc:
        raise Http404(str(exc)) from exc
    findings = replay_findings(page.comparison) if page.comparison else None
    context = {
        "nav": "outages",
        "page": page,
        "findings": findings,
        "ledgers": ledger_summary(),
        "ways": ways,
    }
    return render_page(request, "dashboard/outages.html", context)


def _is_key(raw: str) -> bool:
    return raw.isascii() and raw.isdigit() and len(raw) <= 18


@require_GET
def audit_log(request: HtmxHttpRequest) -> HttpResponse:
    def page_of(data: dict[str, Any], page: int) -> tuple[AuditFilters, Any]:
        filters = AuditFilters(tool=data["tool"], action=data["action"])
        return filters, audit_page(filters=filters, page=page)

    form = AuditFilterForm(request.GET)
    return _filtered_list(request, form, AuditFilters(), page_of, nav="audit", template="audit_log")


@require_GET
def alerts(request: HtmxHttpRequest) -> HttpResponse:
    state = request.GET.get("state", "")
    valid = state in {"", *AlertState.values}
    context = {
        "nav": "alerts",
        "page": alerts_page(state=state) if valid else None,
        "state": state,
        "states": AlertState.values,
    }
    response = render_page(request, "dashboard/alerts.html", context)
    if not valid:
        response.status_code = 400
    return response


# -- runs -------------------------------------------------------------------------------------


@require_GET
def runs_list(request: HtmxHttpRequest) -> HttpResponse:
    def page_of(data: dict[str, Any], page: int) -> tuple[RunFilters, Any]:
        filters = RunFilters(
            run_id=data["run"],
            agent=data["agent"],
            worker=data["worker"],
            status=data["status"],
            degraded={"yes": True, "no": False}.get(data["degraded"]),
        )
        return filters, runs_page(filters=filters, page=page)

    form = RunFilterForm(request.GET)
    return _filtered_list(request, form, RunFilters(), page_of, nav="runs", template="runs")


def _filtered_list(
    request: HtmxHttpRequest,
    form: forms.Form,
    no_filters: object,
    page_of: Callable[[dict[str, Any], int], tuple[object, Any]],
    *,
    nav: str,
    template: str,
) -> HttpResponse:
    """A filtered, paged list (the table is the ``<nav>-table`` partial of
    ``dashboard/<template>.html``): 400 with the form's errors when a filter is invalid."""
    page, filters = None, no_filters
    if form.is_valid():
        data = form.cleaned_data
        filters, page = page_of(data, data["page"] or 1)
    context = {"nav": nav, "form": form, "filters": filters, "page": page}
    response = render_page(request, f"dashboard/{template}.html", context, partial=f"{nav}-table")
    if page is None:
        response.status_code = 400
    return response


@require_GET
def run_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(with_replay(Run.objects.select_related("worker")), pk=pk)
    measure_replay_runs([run])
    models = run.model_call_rows.values_list("model", flat=True).distinct()[:MAX_RULE_MODELS]
    context = {
        "nav": "runs",
        "run": run,
        "timeline": run_timeline(run=run),
        "cache_rules": cache_rules_for_models(models) if run.cache_input_tokens else [],
    }
    return render_page(request, "dashboard/run_detail.html", context)


# -- Slack link -------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def slack_link(request: HtmxHttpRequest) -> HttpResponseBase:
    """Link the Slack account of a signed link (sent to that Slack user alone when they pressed a
    button unlinked) to the logged-in user, once, after they confirm it."""
    user = cast(User, request.user)  # LoginRequiredMiddleware: signed in
    token = (request.POST.get("t") if request.method == "POST" else request.GET.get("t")) or ""
    identity: SlackIdentity | None = None
    error = ""
    if token:
        try:
            identity = read_link_token(token[:2000])
        except LinkError as exc:
            error = str(exc)
    if request.method == "POST" and identity is not None:
        try:
            link_slack_user(identity=identity, user=user, by="self")
        except LinkError as exc:
            error = str(exc)
        else:
            messages.success(
                request, f"Slack user @{identity.name} is now linked to {user.get_username()}."
            )
            return HttpResponseRedirect(reverse("dashboard:slack-link"), status=303)
    context = {
        "nav": "",
        "identity": identity,
        "token": token if identity is not None else "",
        "error": error,
        "links": SlackUser.objects.filter(user=user).order_by("team_id"),
        "already": identity is not None
        and SlackUser.objects.filter(
            team_id=identity.team_id, slack_user_id=identity.user_id
        ).exists(),
    }
    response = render_page(request, "dashboard/slack_link.html", context)
    if error:
        response.status_code = 400
    return response
