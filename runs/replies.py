"""JSON error replies shared by the API routers, and the database-unavailable handler."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

__all__ = ("DB_UNAVAILABLE_RETRY_AFTER_S", "database_unavailable", "service_unavailable")

DB_UNAVAILABLE_RETRY_AFTER_S = 5


def service_unavailable(detail: str, *, retry_after: int) -> HttpResponse:
    response = JsonResponse({"detail": detail}, status=503)
    response["Retry-After"] = str(retry_after)
    return response


def database_unavailable(request: HttpRequest, exc: Exception) -> HttpResponse:
    # The database is down, overloaded (lock/statement timeout) or chose this transaction as a
    # deadlock victim: the transaction was rolled back, so resending is safe.
    return service_unavailable(
        "database unavailable, nothing was written; retry later",
        retry_after=DB_UNAVAILABLE_RETRY_AFTER_S,
    )
