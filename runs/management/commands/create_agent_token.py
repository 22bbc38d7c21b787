"""``python manage.py create_agent_token NAME [--operator]``: the raw token is the last line."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from runs.models import AgentToken
from runs.schemas import MAX_ID_CHARS, check_identifier


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
        parser.add_argument(
            "--worker",
            default="",
            metavar="ID",
            help="bind the token to this worker id: batches naming another worker get 403",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"].strip()
        max_length = AgentToken._meta.get_field("name").max_length or 100
        if not name or len(name) > max_length:
            raise CommandError(f"NAME must be 1-{max_length} characters")
        worker_id = options["worker"].strip()
        if len(worker_id) > MAX_ID_CHARS:
            raise CommandError(f"--worker must be at most {MAX_ID_CHARS} characters")
        try:
            check_identifier(worker_id)
        except ValueError as exc:
            raise CommandError(f"--worker {exc}") from None
        token, raw = AgentToken.issue(
            name=name, is_operator=options["operator"], worker_id=worker_id
        )
        kind = "operator token" if token.is_operator else "agent token"
        bound = f", bound to worker {worker_id!r}" if worker_id else ""
        self.stdout.write(
            f"Created {kind} {token.name!r} (id {token.pk}, starts {token.display_prefix}{bound})."
        )
        self.stdout.write("Store it now: only its hash is kept, it cannot be shown again.")
        self.stdout.write(raw)
