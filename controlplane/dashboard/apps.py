from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "controlplane.dashboard"
    label = "dashboard"
    verbose_name = "Dashboard"
