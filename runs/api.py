"""``POST /api/v1/events``: the thin HTTP shell around ``runs.services.ingest_batch``."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import Router

from runs.auth import AgentAuth
from runs.batch_checks import BatchRefused, parse_batch
from runs.replies import DB_UNAVAILABLE_RETRY_AFTER_S, service_unavailable
from runs.schemas import ErrorReply, IngestReply, event_batch_openapi
from runs.services import CommitUnknown, IngestConflict, ingest_batch

router = Router(tags=["ingest"])

CONFLICT_RETRY_AFTER_S = 1
# The request attribute that holds the ``IngestResult`` of a 200 (read by the metrics middleware).
INGEST_RESULT = "ingest_result"


def _declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _error(status: int, detail: str) -> JsonResponse:
    return JsonResponse({"detail": detail}, status=status)


@router.post(
    "/events",
    auth=AgentAuth(),
    response={
        200: IngestReply,
        400: ErrorReply,
        401: ErrorReply,
        403: ErrorReply,
        413: ErrorReply,
        503: ErrorReply,
    },
    openapi_extra=event_batch_openapi(),
    summary="Report a batch of run events",
    description=(
        "A batch from one worker. Each event is checked on its own: valid events are kept, "
        "rejected ones come back with their index and a reason. Events whose id was already "
        "accepted are counted as duplicates and change nothing. Limits: see docs/api.md."
    ),
)
def post_events(request: HttpRequest) -> HttpResponse:
    max_bytes = settings.INGEST_MAX_BODY_BYTES
    too_big = f"body larger than {max_bytes} bytes; send smaller batches"
    # Refuse on the declared size before reading anything; a body without Content-Length is
    # read only up to the limit.
    if _declared_length(request) > max_bytes:
        return _error(413, too_big)
    raw = request.read(max_bytes + 1)
    if len(raw) > max_bytes:
        return _error(413, too_big)
    try:
        batch = parse_batch(raw, max_events=settings.INGEST_MAX_EVENTS)
        result = ingest_batch(
            token=request.auth,  # type: ignore[attr-defined]
            worker_id=batch.worker_id,
            events=batch.events,
            dropped=batch.dropped,
            may_hold_nulls=batch.may_hold_nulls,
        )
    except BatchRefused as exc:
        return _error(exc.status, exc.detail)
    except CommitUnknown:
        return service_unavailable(
            "the database did not confirm the commit: the batch may have been written; resend"
            " it (events already stored come back as duplicates and are counted once)",
            retry_after=DB_UNAVAILABLE_RETRY_AFTER_S,
        )
    except IngestConflict:
        return service_unavailable(
            "a concurrent batch changed the same run; nothing was written, resend the batch",
            retry_after=CONFLICT_RETRY_AFTER_S,
        )
    # For the metrics middleware (breakers.observability), which counts the events by result.
    setattr(request, INGEST_RESULT, result)
    return JsonResponse(result.as_reply())
