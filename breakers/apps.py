from __future__ import annotations

from django.apps import AppConfig


class BreakersConfig(AppConfig):
    name = "breakers"
    verbose_name = "Fleet breakers"

    def ready(self) -> None:
        from breakers import checks  # noqa: F401 - registers the alert settings checks
