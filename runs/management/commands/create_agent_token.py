"""``python manage.py create_agent_token NAME [--operator]``: the raw token is the last line."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from runs.models import AgentToken


class Command(BaseCommand):
    help = (
        "Create an agent token (or an operator token with --operator) and print it once as the"
        " last line of the output; only its hash is stored. Revoke tokens in the admin."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", help="who or what uses the token, e.g. research-fleet")
        parser.add_argument(
            "--operator",
            action="store_true",
            help="also allow fleet-wide operator actions (force open/close, release, reset)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"].strip()
        max_length = AgentToken._meta.get_field("name").max_length or 100
        if not name or len(name) > max_length:
            raise CommandError(f"NAME must be 1-{max_length} characters")
        token, raw = AgentToken.issue(name=name, is_operator=options["operator"])
        kind = "operator token" if token.is_operator else "agent token"
        self.stdout.write(
            f"Created {kind} {token.name!r} (id {token.pk}, starts {token.display_prefix})."
        )
        self.stdout.write("Store it now: only its hash is kept, it cannot be shown again.")
        self.stdout.write(raw)
