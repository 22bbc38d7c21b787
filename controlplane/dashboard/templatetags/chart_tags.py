"""``{% plotly_chart %}``: a figure from ``dashboard.charts`` drawn in the page by charts.js.

The figure's JSON goes in a ``<script type="application/json">`` beside its div (never run,
escaped the way ``json_script`` escapes) and ``static/js/charts.js`` hands it to the local
``plotly.min.js``. No inline script, no CDN; without JavaScript the caption still says what the
chart would show.
"""

from __future__ import annotations

import json
import re

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# What json_script escapes: the JSON can never close its <script> element or open a comment.
_JSON_SCRIPT_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


_TAGS = re.compile(r"<[^>]*>")


def _summary(figure_json: str) -> str:
    """The figure's title and headline as plain text: what the chart says, for a screen reader."""
    title = json.loads(figure_json).get("layout", {}).get("title") or {}
    parts = [title.get("text", ""), (title.get("subtitle") or {}).get("text", "")]
    return ". ".join(_TAGS.sub(" ", part).strip() for part in parts if part)


@register.simple_tag
def plotly_chart(figure_json: str, element_id: str, label: str) -> SafeString:
    data = mark_safe(str(figure_json).translate(_JSON_SCRIPT_ESCAPES))  # escaped just above
    return format_html(
        '<figure class="chart" aria-label="{label}">'
        '<figcaption class="visually-hidden">{summary}</figcaption>'
        '<div class="chart-plot" id="{id}" data-chart="{id}-data">'
        '<p class="muted chart-fallback">{label}: the chart needs JavaScript.</p></div>'
        '<script type="application/json" id="{id}-data">{data}</script>'
        "</figure>",
        label=label,
        summary=_summary(str(figure_json)) or label,
        id=element_id,
        data=data,
    )


@register.filter
def seconds(value: float | None) -> str:
    """A run's duration for a table: 12.4 s, 6 m 48 s."""
    if value is None:
        return "—"
    if value < 60:
        return f"{value:.1f} s"
    whole = round(value)
    return f"{whole // 60} m {whole % 60:02d} s"
