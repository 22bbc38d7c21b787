"""Who may act on breakers: members of the ``operators`` group, and superusers.

Everyone logged in can see state; only operators get buttons, and the server refuses the
actions of anyone else (``operator_required``), whatever the page showed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase

OPERATORS_GROUP = "operators"
_CACHE_ATTR = "_breaker_panel_is_operator"


def is_operator(user: AbstractBaseUser | AnonymousUser) -> bool:
    """True for active superusers and active members of the operators group.

    The answer is cached on the user object: a page asks once per button otherwise.
    """
    if not user.is_authenticated or not user.is_active:
        return False
    cached = getattr(user, _CACHE_ATTR, None)
    if cached is None:
        cached = bool(getattr(user, "is_superuser", False)) or (
            user.groups.filter(name=OPERATORS_GROUP).exists()  # type: ignore[attr-defined]
        )
        setattr(user, _CACHE_ATTR, cached)
    return bool(cached)


def operators_group() -> Group:
    """The operators group (a data migration creates it; this also survives a flushed test db)."""
    group, _ = Group.objects.get_or_create(name=OPERATORS_GROUP)
    return group


def operator_required[V: Callable[..., HttpResponseBase]](view: V) -> V:
    """Refuse (403) a view to anyone who is not an operator."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not is_operator(request.user):
            raise PermissionDenied("Only operators can act on breakers.")
        return view(request, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
