"""Front-end assets are local: htmx from django-htmx, plotly.min.js from the plotly package."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.templatetags.static import static
from django.test import override_settings

from controlplane.staticfiles import PLOTLY_STATIC_PATH


def test_plotly_is_found_as_a_vendor_static_file() -> None:
    found = finders.find(PLOTLY_STATIC_PATH)
    assert isinstance(found, str)
    assert Path(found).name == "plotly.min.js"
    assert Path(found).stat().st_size > 1_000_000
    assert static(PLOTLY_STATIC_PATH) == "/static/vendor/plotly.min.js"


def test_other_paths_are_not_found_by_the_plotly_finder() -> None:
    from controlplane.staticfiles import PlotlyFinder

    finder = PlotlyFinder()
    assert finder.find("vendor/plotly.js") is None
    assert finder.find("plotly.min.js", find_all=True) == []
    assert finder.check() == []


def test_stylesheet_is_found() -> None:
    assert finders.find("css/panel.css")


@pytest.mark.timeout(120)
def test_collectstatic_copies_plotly(tmp_path: Path) -> None:
    with override_settings(STATIC_ROOT=tmp_path):
        call_command("collectstatic", interactive=False, verbosity=0)
    copied = tmp_path / "vendor" / "plotly.min.js"
    assert copied.is_file()
    assert copied.stat().st_size == Path(str(finders.find(PLOTLY_STATIC_PATH))).stat().st_size
    assert (tmp_path / "css" / "panel.css").is_file()
    assert (tmp_path / "django_htmx" / "htmx-2.min.js").is_file()
