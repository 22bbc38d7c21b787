"""System checks for ingest's settings: a configuration mistake shows at start-up, with an id."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.core.exceptions import ImproperlyConfigured

from runs.ingest_fleet import updater_factory


@register()
def check_fleet_updater(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        updater_factory(getattr(settings, "INGEST_FLEET_UPDATER", None))
    except ImproperlyConfigured as exc:
        return [Error(str(exc), id="runs.E001")]
    return []
