"""The project's own app: it holds the system checks of the deployment's settings."""

from __future__ import annotations

from django.apps import AppConfig


class ControlPlaneConfig(AppConfig):
    name = "controlplane"
    verbose_name = "Control plane"

    def ready(self) -> None:
        from controlplane import checks  # noqa: F401  (registers the checks)
