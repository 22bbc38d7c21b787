"""Fleet breaker rows: tools and policies, transitions, incidents, probes, operator actions."""

from __future__ import annotations
