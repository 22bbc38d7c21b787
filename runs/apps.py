from __future__ import annotations

from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Agent runs"

    def ready(self) -> None:
        from runs import checks  # noqa: F401 - registers the ingest settings checks
