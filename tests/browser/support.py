"""Helpers for the browser tests and the production browser check (fixtures in this package's
conftest): how Chromium is found and started, and what a page did that a test must notice."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS_DIR = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def find_chromium() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium")


@dataclass
class PageWatch:
    """What the page did that a test must notice: dialogs (an XSS fired) and script errors."""

    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
