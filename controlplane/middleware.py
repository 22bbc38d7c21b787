"""Login for every page, secure by default: a page someone adds later is protected without a
decorator. Only views marked ``login_not_required`` (the login page) and the token-authenticated
API under ``/api/`` are let through; the API answers 401 itself instead of redirecting to HTML.
The API's docs page and schema are for people, so they stay behind the login like any page.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequiredMiddleware
from django.http import HttpRequest, HttpResponseBase
from django_htmx.http import HttpResponseClientRedirect

# Paths that authenticate with bearer tokens (ingest, fleet state, operator tokens).
TOKEN_AUTH_PATH_PREFIXES: tuple[str, ...] = ("/api/",)
# django-ninja's URL names for the interactive docs page and the OpenAPI schema.
API_PAGES_FOR_PEOPLE = frozenset({"openapi-view", "openapi-json"})


class LoginRequiredMiddleware(DjangoLoginRequiredMiddleware):
    def process_view(
        self,
        request: HttpRequest,
        view_func: Any,
        view_args: Any,
        view_kwargs: Any,
    ) -> HttpResponseBase | None:
        if request.path_info.startswith(TOKEN_AUTH_PATH_PREFIXES) and not _is_api_page(request):
            return None
        response = super().process_view(request, view_func, view_args, view_kwargs)
        if response is not None and getattr(request, "htmx", False):
            # A poll or a filter from a page whose session expired: swapping the login form into
            # a table would be confusing, so htmx sends the whole page to the login screen.
            return HttpResponseClientRedirect(response["Location"])
        return response


def _is_api_page(request: HttpRequest) -> bool:
    match = request.resolver_match
    return match is not None and match.url_name in API_PAGES_FOR_PEOPLE
