"""Linking a Slack user to a dashboard user.

An admin links anyone (Django admin). A user links themselves once: the "not allowed" answer to
an unlinked press carries a signed link (the Slack identity, valid for an hour) that only that
Slack user sees; opening it while logged in to the dashboard and confirming makes the link. An
email match through ``users.info`` only ever suggests which dashboard user to log in as:
dashboard emails are not verified, so a match proves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.db import IntegrityError, transaction
from django.urls import reverse

from breakers.models import SlackUser
from breakers.transports import TransportError
from breakers.transports.slack_bot import SlackBot

__all__ = (
    "LINK_MAX_AGE_SECONDS",
    "LinkError",
    "SlackIdentity",
    "link_slack_user",
    "link_token",
    "link_url",
    "read_link_token",
    "suggested_user",
)

LINK_MAX_AGE_SECONDS = 3600
_SALT = "breakers.slack.link"


class LinkError(Exception):
    """A link that cannot be made; the message says why."""


@dataclass(frozen=True, slots=True)
class SlackIdentity:
    team_id: str
    user_id: str
    name: str


def link_token(identity: SlackIdentity) -> str:
    return signing.dumps([identity.team_id, identity.user_id, identity.name], salt=_SALT)


def read_link_token(token: str) -> SlackIdentity:
    try:
        team_id, user_id, name = signing.loads(token, salt=_SALT, max_age=LINK_MAX_AGE_SECONDS)
    except signing.SignatureExpired:
        raise LinkError(
            "this link has expired: press a button in Slack again for a new one"
        ) from None
    except (signing.BadSignature, ValueError, TypeError):
        raise LinkError("this link is not valid (it may have been cut short when copied)") from None
    return SlackIdentity(team_id=str(team_id), user_id=str(user_id), name=str(name))


def link_url(identity: SlackIdentity) -> str:
    path = reverse("dashboard:slack-link")
    return f"{settings.SITE_URL.rstrip('/')}{path}?t={link_token(identity)}"


def link_slack_user(*, identity: SlackIdentity, user: User, by: str) -> SlackUser:
    """Link ``identity`` to ``user``; by the user themselves only once per workspace."""
    if by == "self" and SlackUser.objects.filter(user=user, team_id=identity.team_id).exists():
        raise LinkError(
            f"{user.get_username()} is already linked to a Slack account in this workspace; "
            "an admin can change it"
        )
    try:
        with transaction.atomic():
            return SlackUser.objects.create(
                team_id=identity.team_id,
                slack_user_id=identity.user_id,
                slack_name=identity.name[:120],
                user=user,
                linked_by=by,
            )
    except IntegrityError:
        raise LinkError(
            "this Slack account is already linked to a dashboard user; an admin can change it"
        ) from None


def suggested_user(*, user_id: str, bot: SlackBot) -> User | None:
    """The one active dashboard user whose email is the Slack user's (a hint, never a link)."""
    try:
        email = bot.user_email(user_id)
    except TransportError:
        return None  # no users:read.email scope, or Slack unreachable: no suggestion
    if not email:
        return None
    matches = list(User.objects.filter(email__iexact=email, is_active=True)[:2])
    return matches[0] if len(matches) == 1 else None
