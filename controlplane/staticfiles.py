"""A staticfiles finder for the plotly.min.js bundled inside the plotly package.

The file is 4+ MB and already versioned by the pinned plotly release, so it is served from the
installed package (as ``vendor/plotly.min.js``) instead of being committed. ``{% static %}``,
``runserver`` and ``collectstatic`` all go through finders, so all three see it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, overload

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import CheckMessage, Error
from django.core.files.storage import FileSystemStorage

PLOTLY_STATIC_PATH = "vendor/plotly.min.js"
_PLOTLY_DIR = Path(plotly.__file__).resolve().parent / "package_data"
_PREFIX, _NAME = PLOTLY_STATIC_PATH.rsplit("/", 1)


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=_PLOTLY_DIR)
        # collectstatic joins a storage's prefix to the listed name.
        self.storage.prefix = _PREFIX  # type: ignore[attr-defined]

    def check(self, **kwargs: Any) -> list[CheckMessage]:
        if not (_PLOTLY_DIR / _NAME).is_file():
            return [
                Error(
                    f"plotly.min.js is missing from {_PLOTLY_DIR}",
                    hint="Reinstall the pinned plotly package (pip install -r requirements.lock).",
                    id="dashboard.E001",
                )
            ]
        return []

    @overload
    def find(self, path: str, find_all: Literal[False] = False) -> str | None: ...
    @overload
    def find(self, path: str, find_all: Literal[True]) -> list[str]: ...
    def find(self, path: str, find_all: bool = False) -> str | list[str] | None:
        found = _PLOTLY_DIR / _NAME
        if path != PLOTLY_STATIC_PATH or not found.is_file():
            return [] if find_all else None
        return [str(found)] if find_all else str(found)

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        if (_PLOTLY_DIR / _NAME).is_file():
            yield _NAME, self.storage
