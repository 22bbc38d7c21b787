"""Which silence holds a tool's repeat alerts now: one selector for the alerts, the Slack cards,
the board and the tool page (``ToolSilence.objects.in_force`` says what "in force" means)."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from breakers.models import ToolSilence

__all__ = ("active_silence",)


def active_silence(tool_id: int, *, now: datetime | None = None) -> ToolSilence | None:
    """The tool's silence in force at ``now``, if any (the newest one)."""
    return (
        ToolSilence.objects.in_force(now or timezone.now())
        .filter(tool_id=tool_id)
        .select_related("incident")
        .order_by("-set_at", "-pk")
        .first()
    )
