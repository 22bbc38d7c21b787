"""The run, runs and tool pages say where data came from (SDK or OTLP) and which spend is
estimated."""

from __future__ import annotations

import pytest
from django.test import Client

from breakers.models import Tool
from runs.models import Run
from tests.otlp.spans import agent_span, model_span, tool_span, trace_id
from tests.otlp.support import PostSpans

pytestmark = pytest.mark.django_db


def test_the_run_page_shows_otlp_as_the_source_and_the_estimated_spend(
    post_spans: PostSpans, admin_client: Client
) -> None:
    trace = trace_id(0x51)
    post_spans([model_span(trace), tool_span(trace), agent_span(trace, name="<b>bold</b>")])
    run = Run.objects.get()
    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-source="otlp"' in page
    assert "(estimated)" in page
    assert "needs the <code>breaker_panel</code> SDK or an integration" in page
    assert "<b>bold</b>" not in page  # agent-sent text is escaped
    listing = admin_client.get("/runs/").content.decode()
    assert "data-cost-estimated" in listing and "OTLP" in listing


def test_a_reported_cost_is_not_marked_estimated(
    post_spans: PostSpans, admin_client: Client
) -> None:
    post_spans([model_span(trace_id(0x52), extra={"gen_ai.usage.cost": 0.2})])
    page = admin_client.get(f"/runs/{Run.objects.get().pk}/").content.decode()
    assert "(estimated)" not in page


def test_the_tool_page_shows_the_source_of_each_call(
    post_spans: PostSpans, admin_client: Client
) -> None:
    post_spans([tool_span(trace_id(0x53), error_type="TimeoutError")])
    tool = Tool.objects.get(name="web_search")
    page = admin_client.get(f"/tools/{tool.pk}/").content.decode()
    assert 'data-source="otlp"' in page
    assert "1 of these calls came from OpenTelemetry traces" in page
