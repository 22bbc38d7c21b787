"""Helpers for the OTLP receiver tests (the fixtures that use them are in this package's
conftest)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TRACES_URL = "/v1/traces"

PostSpans = Callable[..., Any]
