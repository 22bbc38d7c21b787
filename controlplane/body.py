"""The whole request body is read first, within REQUEST_BODY_TIMEOUT_SECONDS, before any
middleware or view can take a database connection: a client that trickles its body (or stops
half-way) holds a parked greenlet, never a PostgreSQL connection (issue 23)."""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext, suppress

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

__all__ = ("BodyFirstMiddleware", "body_limit")

_CHUNK = 65_536
# Routes whose views answer a too-large body themselves (413 in their own format) and have a
# limit of their own; every other route has Django's DATA_UPLOAD_MAX_MEMORY_SIZE.
_ROUTE_LIMITS = {"/api/v1/events": "INGEST_MAX_BODY_BYTES", "/v1/traces": "OTLP_MAX_BODY_BYTES"}


class BodyTimeout(Exception):
    """The body did not arrive whole within the timeout."""


def body_limit(path: str) -> tuple[int, bool]:
    """The most bytes a body to ``path`` may have, and whether its view answers a larger one."""
    if (name := _ROUTE_LIMITS.get(path)) is not None:
        return int(getattr(settings, name)), True
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 2_621_440), False


def _declared_length(request: HttpRequest) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def _read_within(request: HttpRequest, length: int, seconds: float) -> bytes:
    """``length`` bytes of the body (fewer if the client hangs up), or ``BodyTimeout``.

    Under gunicorn's gevent workers a ``gevent.Timeout`` interrupts a read that is waiting for
    bytes; elsewhere (runserver, threads) the deadline is checked between chunks only.
    """
    deadline = time.monotonic() + seconds
    chunks: list[bytes] = []
    with _interrupt_after(seconds):
        while length > 0:
            chunk = request.read(min(_CHUNK, length))
            if not chunk:
                break
            chunks.append(chunk)
            length -= len(chunk)
            if time.monotonic() > deadline:
                raise BodyTimeout
    return b"".join(chunks)


def _interrupt_after(seconds: float) -> AbstractContextManager[object]:
    try:
        from gevent import Timeout
        from gevent.monkey import is_module_patched
    except ImportError:  # gevent is the production server's dependency, not the app's
        return nullcontext()
    return Timeout(seconds, BodyTimeout) if is_module_patched("socket") else nullcontext()


def _stop_reading(request: HttpRequest) -> None:
    """After a timeout gunicorn would wait for the rest of the body before the next request on
    the connection: shut its reading half so the connection closes after the reply."""
    sock = request.META.get("gunicorn.socket")
    if isinstance(sock, socket.socket):
        with suppress(OSError):  # already gone
            sock.shutdown(socket.SHUT_RD)


class BodyFirstMiddleware:
    """First in MIDDLEWARE: reads the body into memory, then hands the request on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = _declared_length(request)
        if length == 0:
            return self.get_response(request)
        limit, view_answers = body_limit(request.path_info)
        if length > limit:
            if view_answers:  # it refuses on the declared size without reading the body
                return self.get_response(request)
            return JsonResponse({"detail": f"body larger than {limit} bytes"}, status=413)
        try:
            body = _read_within(request, length, settings.REQUEST_BODY_TIMEOUT_SECONDS)
        except BodyTimeout:
            _stop_reading(request)
            seconds = settings.REQUEST_BODY_TIMEOUT_SECONDS
            detail = f"the body did not arrive within {seconds:g} s; nothing was read"
            return JsonResponse({"detail": detail}, status=408)
        except OSError:
            body = b""
        if len(body) < length:
            # The client hung up part-way: nothing for a view to do, and a crowd of tricklers
            # that disconnect at once must not all take a database connection then.
            detail = "the body ended before its Content-Length; nothing was read"
            return JsonResponse({"detail": detail}, status=400)
        # What HttpRequest.body does once it has read: later reads, request.body and request.POST
        # are served from memory.
        request._body = body  # type: ignore[attr-defined]
        request._stream = io.BytesIO(body)  # type: ignore[attr-defined]
        return self.get_response(request)
