"""OTLP model spans with prompt caching: ``gen_ai.usage.cache_read.input_tokens`` and
``gen_ai.usage.cache_creation.input_tokens`` become the call's cache counts and its price uses the
table's cache rates; usage that cannot be priced is stored as unknown and marked."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from genai_prices import Usage, calc_price

from runs.models import CostSource, ModelCall, Run
from tests.otlp.spans import agent_span, model_span, trace_id
from tests.otlp.support import PostSpans

pytestmark = pytest.mark.django_db

READ = "gen_ai.usage.cache_read.input_tokens"
WRITE = "gen_ai.usage.cache_creation.input_tokens"


def _post(post_spans: PostSpans, *, drop: str = "", **kw: Any) -> ModelCall:
    trace = trace_id(0xCAC4E)
    span = model_span(trace, start=1, end=2, **kw)
    span.attributes.pop(drop, None)
    response = post_spans([span, agent_span(trace, end=3)])
    assert response.status_code == 200, response.content
    assert response.partial == (0, "")
    return ModelCall.objects.get()


def test_cache_attributes_are_mapped_and_priced_at_the_cache_rates(post_spans: PostSpans) -> None:
    call = _post(
        post_spans,
        model="claude-opus-4-5",
        input_tokens=30_000,
        output_tokens=200,
        extra={"gen_ai.provider.name": "anthropic", READ: 25_000, WRITE: 3_000},
    )
    usage = Usage(
        input_tokens=30_000, output_tokens=200, cache_read_tokens=25_000, cache_write_tokens=3_000
    )
    expected = calc_price(usage, model_ref="claude-opus-4-5").total_price
    assert (call.cache_read_tokens, call.cache_write_tokens) == (25_000, 3_000)
    assert call.cost_usd == expected.quantize(Decimal("0.000001"))
    assert call.cost_source == CostSource.TABLE
    run = Run.objects.get()
    assert run.cost_estimated and run.cached_share == pytest.approx(25_000 / 30_000)


def test_a_reported_cost_is_kept_with_its_cache_counts(post_spans: PostSpans) -> None:
    call = _post(post_spans, extra={READ: 800, "gen_ai.usage.cost": 0.01})
    assert (call.cost_usd, call.cost_source, call.cache_read_tokens) == (
        Decimal("0.010000"),
        CostSource.REPORTED,
        800,
    )


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"input_tokens": -20}, "input_tokens is negative"),
        ({"drop": "gen_ai.usage.input_tokens"}, "input_tokens is absent"),
        ({"input_tokens": 5 * 10**9}, "input_tokens is absurd"),
        ({"input_tokens": 100, "extra": {READ: 400}}, "exceed input_tokens"),
        ({"model": "a-model-nobody-sells"}, "does not know model 'a-model-nobody-sells'"),
    ],
    ids=["negative", "absent", "absurd", "cache above input", "unknown model"],
)
def test_usage_that_cannot_be_priced_lands_marked_unknown(
    post_spans: PostSpans, kw: dict[str, Any], reason: str
) -> None:
    call = _post(post_spans, **kw)
    assert call.cost_source == CostSource.UNKNOWN
    assert reason in call.problem
    assert Run.objects.get().unpriced_calls == 1
