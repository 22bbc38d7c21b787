"""``POST /slack/actions``: Slack's interactivity request URL. Verified first (signature, time,
replay), then answered at once; what takes time happens in Celery."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from breakers.access.ops_endpoints import ops_redis
from breakers.slack.actions import handle_interaction
from breakers.slack.verify import RequestRefused, verify_slack_request

__all__ = ("slack_actions",)


@csrf_exempt  # Slack cannot hold a CSRF token: the signature is what authenticates it
@login_not_required
@require_POST
def slack_actions(request: HttpRequest) -> HttpResponse:
    body = request.body
    try:
        verify_slack_request(
            body=body,
            headers=dict(request.headers.items()),
            signing_secret=settings.SLACK_SIGNING_SECRET,
            seen=ops_redis(),
        )
    except RequestRefused as exc:
        return _text(exc.why, exc.status)
    reply = handle_interaction(body=body)
    if reply.body is not None:
        return JsonResponse(reply.body, status=reply.status)
    return _text(reply.text, reply.status)


def _text(text: str, status: int) -> HttpResponse:
    response = HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")
    response["Cache-Control"] = "no-store"
    return response
