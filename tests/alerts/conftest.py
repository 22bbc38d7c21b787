"""Fixtures for the Slack alert tests.

The fake Slack server fixture is imported here so these tests run before the root conftest
registers ``tests.fakes.fixtures`` as a plugin; once it does, this import is redundant but
harmless (pytest picks the closest definition).
"""

from __future__ import annotations

from tests.fakes.fixtures import slack_server

__all__ = ("slack_server",)
