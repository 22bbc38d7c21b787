"""``python manage.py link_slack_user``: link a Slack user to a dashboard user, as an admin would
(the demo links the stand-in's @operator to its operator login)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from breakers.models import SlackUser


class Command(BaseCommand):
    help = "Link a Slack user (team id + user id) to a dashboard user; presses run as them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="the workspace id (T…)")
        parser.add_argument("--slack-user", required=True, help="the member id (U…)")
        parser.add_argument("--slack-name", default="", help="the Slack name, for display")
        parser.add_argument("--username", required=True, help="the dashboard user")

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no dashboard user {options['username']!r}")
        link, created = SlackUser.objects.update_or_create(
            team_id=options["team"],
            slack_user_id=options["slack_user"],
            defaults={
                "user": user,
                "slack_name": options["slack_name"] or options["slack_user"],
                "linked_by": "command:link_slack_user",
            },
        )
        verb = "linked" if created else "re-linked"
        self.stdout.write(f"Slack user {link.slack_user_id} {verb} to {user.get_username()}")
