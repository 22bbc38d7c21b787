"""``python manage.py ensure_demo_operator``: the demo's login, an operator and staff user."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from breakers.access.operators import operators_group


class Command(BaseCommand):
    help = "Create (or reset the password of) the demo operator login."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="operator")
        parser.add_argument("--password", default="breaker-panel-demo")

    def handle(self, *args: Any, **options: Any) -> None:
        user, _ = get_user_model().objects.get_or_create(username=options["username"])
        user.set_password(options["password"])
        user.is_staff = True
        user.save()
        user.groups.add(operators_group())
        self.stdout.write(f"operator login: {options['username']} / {options['password']}")
