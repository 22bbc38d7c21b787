"""Model prices from the ``genai-prices`` table, with cached input priced apart.

A call's input tokens include the ones read from and written to the provider's prompt cache;
each part is priced at the table's own rate for the model (``input_mtok``, ``cache_read_mtok``,
``cache_write_mtok``; a rate the table lacks is the input rate, as the table itself does). No rate
is written here. Usage that cannot be priced (counts absent, negative, absurd, a cache count above
the input, a model the table does not know) gives ``Price(usd=None, problem=...)``: the caller
stores it as unknown and the pages mark it, never as a silent $0
(docs/adr/0203-cache-aware-prices.md).

A full table look-up costs about 0.1-2 ms, too much for every model call of a busy fleet, so each
model's rates are looked up once and applied here, a tiered rate (by context length) with the
table's own rule; tests hold the result to the table's ``calc_price`` (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from genai_prices import Usage, calc_price
from genai_prices.types import TieredPrices

__all__ = ("MAX_CALL_TOKENS", "Price", "price_call", "table_provider", "usage_problem")

_PER_MTOK = Decimal(1_000_000)
# More tokens than this in one call is a bug, not a call: ten times the largest context window
# any model offered when this was written (10M tokens).
MAX_CALL_TOKENS = 100_000_000


@dataclass(frozen=True, slots=True)
class Price:
    usd: Decimal | None  # None: unknown, and ``problem`` says why
    problem: str = ""
    provider: str = ""  # the table's provider id for the model ("" when it does not know it)


def usage_problem(
    input_tokens: object,
    output_tokens: object,
    cache_read_tokens: object = None,
    cache_write_tokens: object = None,
) -> str | None:
    """Why these token counts cannot be priced, or None when they can. The cache counts are
    optional (None: not reported); the input and output counts are not."""
    counts = {
        "input_tokens": (input_tokens, True),
        "output_tokens": (output_tokens, True),
        "cache_read_tokens": (cache_read_tokens, False),
        "cache_write_tokens": (cache_write_tokens, False),
    }
    for name, (value, required) in counts.items():
        if value is None:
            if required:
                return f"{name} is absent"
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name} is not a whole number"
        if value < 0:
            return f"{name} is negative ({value})"
        if value > MAX_CALL_TOKENS:
            return f"{name} is absurd for one call ({value:,} > {MAX_CALL_TOKENS:,})"
    cached = (cache_read_tokens or 0) + (cache_write_tokens or 0)  # type: ignore[operator]
    if cached > input_tokens:  # type: ignore[operator]
        return (
            f"cache_read_tokens + cache_write_tokens ({cached:,}) exceed input_tokens "
            f"({input_tokens:,}), which include them"
        )
    return None


def price_call(
    *,
    model: str,
    provider: str = "",
    input_tokens: Any,
    output_tokens: Any,
    cache_read_tokens: Any = None,
    cache_write_tokens: Any = None,
) -> Price:
    """USD for one model call, cache reads and writes at their own rates; or why not."""
    problem = usage_problem(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    if problem is not None:
        return Price(None, f"not priced: {problem}")
    if not model:
        return Price(None, "not priced: the call names no model")
    entry = _price_entry(model, provider)
    if entry is None:
        return Price(None, f"not priced: the genai-prices table does not know model {model!r}")
    provider_id, rates = entry
    read, write = cache_read_tokens or 0, cache_write_tokens or 0
    input_mtok, output_mtok, read_mtok, write_mtok = (_at(rate, input_tokens) for rate in rates)
    total = (
        (input_tokens - read - write) * input_mtok
        + read * read_mtok
        + write * write_mtok
        + output_tokens * output_mtok
    ) / _PER_MTOK
    return Price(total, provider=provider_id)


def table_provider(model: str, provider: str = "") -> str:
    """The table's provider id for ``model`` ("" when the table does not know it)."""
    entry = _price_entry(model, provider) if model else None
    return "" if entry is None else entry[0]


Rate = Decimal | TieredPrices


@lru_cache(maxsize=1024)
def _price_entry(model: str, provider: str) -> tuple[str, tuple[Rate, Rate, Rate, Rate]] | None:
    """(the table's provider id, its (input, output, cache read, cache write) USD per million
    tokens for the model), or None if the table knows no such model. gen_ai.provider.name values
    such as "gcp.gemini" are not always the table's provider ids, so the model name alone is
    tried too. A rate the table lacks is the input rate (the table's own rule)."""
    usage = Usage(input_tokens=0, output_tokens=0)
    for provider_id in dict.fromkeys((provider or None, None)):
        try:
            found = calc_price(usage, model_ref=model, provider_id=provider_id)
        except LookupError:
            continue
        prices = found.model_price
        input_mtok = _rate(prices, "input_mtok") or Decimal(0)
        rates = (
            input_mtok,
            _rate(prices, "output_mtok") or Decimal(0),
            _rate(prices, "cache_read_mtok") or input_mtok,
            _rate(prices, "cache_write_mtok") or input_mtok,
        )
        return found.provider.id, rates
    return None


def _rate(prices: Any, key: str) -> Rate | None:
    value = getattr(prices, key, None)
    return value if isinstance(value, Decimal | TieredPrices) else None


def _at(rate: Rate, input_tokens: int) -> Decimal:
    """The rate for a call of ``input_tokens``: a tiered price applies the highest tier whose
    start the input passes, to every token (the table's "cliff" rule, ``calc_unit_price``)."""
    if isinstance(rate, Decimal):
        return rate
    for tier in reversed(rate.tiers):
        if input_tokens > tier.start:
            return tier.price
    return rate.base
