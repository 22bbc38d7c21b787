"""Cache-aware prices through the events API: cache reads and writes priced at the table's own
rates for the model, and usage that cannot be priced stored as unknown and marked, never a 500
and never a silent $0."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from genai_prices import Usage, calc_price

from runs.models import CostSource, ModelCall, Run
from tests.ingest.support import PostBatch, event

pytestmark = pytest.mark.usefixtures("writer")

CLAUDE = "claude-opus-4-5"  # flat prices with cache-read and cache-write rates in the table
GPT = "gpt-4.1"  # a cache-read rate, no cache-write rate (OpenAI charges none)


def _table_usd(model: str, **usage: int) -> Decimal:
    """What the genai-prices table itself says, to the micro-dollar (the test's oracle)."""
    price = calc_price(Usage(**usage), model_ref=model).total_price
    return price.quantize(Decimal("0.000001"))


def _post_call(post_batch: PostBatch, **fields: Any) -> dict[str, Any]:
    call = event("model.call", **fields)
    response = post_batch({"worker_id": "w-1", "events": [event("run.started"), call]})
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.django_db
@pytest.mark.parametrize("model", [CLAUDE, GPT])
def test_a_call_without_a_cost_is_priced_with_the_cache_rates_of_its_model(
    post_batch: PostBatch, model: str
) -> None:
    usage = {
        "input_tokens": 20_000,
        "output_tokens": 300,
        "cache_read_tokens": 15_000,
        "cache_write_tokens": 4_000,
    }
    body = _post_call(post_batch, model=model, cost_usd=None, **usage)
    assert body["accepted"] == 2 and body["rejected"] == []

    call = ModelCall.objects.get()
    assert call.cost_source == CostSource.TABLE and call.problem == ""
    assert call.cost_usd == _table_usd(model, **usage)
    # Cached input is cheaper than fresh input: the same tokens with no cache are dearer.
    assert call.cost_usd < _table_usd(model, input_tokens=20_000, output_tokens=300)
    assert (call.cache_read_tokens, call.cache_write_tokens) == (15_000, 4_000)
    run = Run.objects.get()
    assert (run.cache_read_tokens, run.cache_write_tokens, run.cache_input_tokens) == (
        15_000,
        4_000,
        20_000,
    )
    assert run.cached_share == pytest.approx(0.75)
    assert run.unpriced_calls == 0


@pytest.mark.django_db
@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "gemini-2.5-pro"])
@pytest.mark.parametrize("input_tokens", [150_000, 250_000], ids=["base tier", "long context"])
def test_tiered_prices_follow_the_tables_own_rule(
    post_batch: PostBatch, model: str, input_tokens: int
) -> None:
    usage = {
        "input_tokens": input_tokens,
        "output_tokens": 900,
        "cache_read_tokens": input_tokens - 20_000,
        "cache_write_tokens": 10_000,
    }
    _post_call(post_batch, model=model, cost_usd=None, **usage)
    assert ModelCall.objects.get().cost_usd == _table_usd(model, **usage)


@pytest.mark.django_db
def test_a_reported_cost_is_kept_and_cache_counts_stored(post_batch: PostBatch) -> None:
    _post_call(post_batch, cost_usd=0.061, cache_read_tokens=4800, cache_write_tokens=0)
    call = ModelCall.objects.get()
    assert (call.cost_usd, call.cost_source) == (Decimal("0.061000"), CostSource.REPORTED)
    assert (call.cache_read_tokens, call.cache_write_tokens) == (4800, 0)


@pytest.mark.django_db
def test_null_cache_counts_mean_absent_and_leave_the_cached_share_unknown(
    post_batch: PostBatch,
) -> None:
    _post_call(post_batch, cache_read_tokens=None, cache_write_tokens=None)
    call, run = ModelCall.objects.get(), Run.objects.get()
    assert (call.cache_read_tokens, call.cache_write_tokens) == (None, None)
    assert run.cached_share is None


BAD_USAGE: dict[str, tuple[dict[str, Any], str]] = {
    "negative input": ({"input_tokens": -1}, "input_tokens is negative (-1)"),
    "negative cache read": ({"cache_read_tokens": -3}, "cache_read_tokens is negative (-3)"),
    "absent input": ({"input_tokens": None}, "input_tokens is absent"),
    "absent output": ({"output_tokens": None}, "output_tokens is absent"),
    "absurd input": ({"input_tokens": 10**15}, "input_tokens is absurd for one call"),
    "absurd output": ({"output_tokens": 2**40}, "output_tokens is absurd for one call"),
    "cache above input": (
        {"input_tokens": 1000, "cache_read_tokens": 900, "cache_write_tokens": 200},
        "cache_read_tokens + cache_write_tokens (1,100) exceed input_tokens (1,000)",
    ),
    "unknown model": (
        {"model": "no-such-model-from-anyone-7"},
        "the genai-prices table does not know model 'no-such-model-from-anyone-7'",
    ),
    "no model": ({"model": ""}, "the call names no model"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(BAD_USAGE), ids=list(BAD_USAGE))
def test_usage_that_cannot_be_priced_is_stored_as_unknown_and_marked(
    post_batch: PostBatch, case: str
) -> None:
    fields, reason = BAD_USAGE[case]
    base = {"model": CLAUDE, "cost_usd": None, "input_tokens": 5000, "output_tokens": 100}
    body = _post_call(post_batch, **(base | fields))
    # Accepted, not rejected: its step and its place in the run still count.
    assert (body["accepted"], body["rejected"]) == (2, [])

    call, run = ModelCall.objects.get(), Run.objects.get()
    assert call.cost_source == CostSource.UNKNOWN
    assert reason in call.problem
    assert run.unpriced_calls == 1 and run.model_calls == 1
    assert call.input_tokens >= 0 and call.output_tokens >= 0


@pytest.mark.django_db
def test_bad_counts_beside_a_reported_cost_keep_the_cost_and_mark_the_tokens(
    post_batch: PostBatch,
) -> None:
    _post_call(post_batch, input_tokens=-50, cost_usd=0.25)
    call, run = ModelCall.objects.get(), Run.objects.get()
    assert (call.cost_usd, call.cost_source) == (Decimal("0.250000"), CostSource.REPORTED)
    assert "token counts unusable: input_tokens is negative" in call.problem
    assert (call.input_tokens, run.input_tokens, run.unpriced_calls) == (0, 0, 0)


@pytest.mark.django_db
def test_a_token_count_that_is_not_a_number_is_still_rejected_with_its_reason(
    post_batch: PostBatch,
) -> None:
    body = _post_call(post_batch, cache_read_tokens="many")
    assert body["accepted"] == 1
    assert "cache_read_tokens: Input should be a valid integer" in body["rejected"][0]["reason"]
    assert not ModelCall.objects.exists()
