"""Framework integrations: one module per framework, each importing its framework lazily.

Importing `breaker_panel` never imports this package's modules; importing one of them without
its framework installed raises `DidNotEnable` naming the extra to install.
"""

from __future__ import annotations

__all__ = ["DidNotEnable"]


class DidNotEnable(ImportError):  # sentry-python's name for the same idea
    """The framework this integration needs is not installed."""
