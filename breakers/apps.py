from __future__ import annotations

from django.apps import AppConfig


class BreakersConfig(AppConfig):
    name = "breakers"
    verbose_name = "Fleet breakers"

    def ready(self) -> None:
        from breakers import checks  # noqa: F401 - registers the alert settings checks
        from breakers.services import ingest_fleet_hooks
        from runs.fleet_hooks import register_fleet_hooks

        register_fleet_hooks(ingest_fleet_hooks())
