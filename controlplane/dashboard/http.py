"""Request typing and the one rendering rule htmx views share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """An HttpRequest after HtmxMiddleware (the typing pattern of django-stubs/django-htmx)."""

    htmx: HtmxDetails


def render_page(
    request: HtmxHttpRequest,
    template_name: str,
    context: Mapping[str, Any],
    *,
    partial: str | None = None,
) -> HttpResponse:
    """Render the whole page, or only ``template_name#partial`` for an htmx request.

    A history-restore request (htmx missed its cache after Back) wants the whole page, not the
    fragment. ``Vary: HX-Request`` keeps a browser or proxy cache from serving the fragment as the
    page (or the page as the fragment) for the same URL.
    """
    fragment = bool(partial and request.htmx and not request.htmx.history_restore_request)
    name = f"{template_name}#{partial}" if fragment else template_name
    response = render(request, name, context)
    if partial:
        patch_vary_headers(response, ("HX-Request",))
    return response
