"""What a fleet service refuses, as exceptions the API maps to statuses."""

from __future__ import annotations

from breakers.fleet import rules

MAX_REASON_CHARS = 1000


class FleetError(Exception):
    """A fleet request that cannot be done as asked; the message says why."""


class UnknownToolError(FleetError):
    pass


class FleetInputError(FleetError):
    pass


class NotForcedError(FleetError, rules.NotForcedError):
    """Release of a tool that is not forced (the reference model raises its base class)."""
