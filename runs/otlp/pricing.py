"""Model prices for spans that carry tokens but no cost: the ``genai-prices`` table.

A full table look-up costs about 0.1-2 ms, too much for every model span of a busy exporter, so
each model's price entry is looked up once and flat per-token prices are applied directly;
tiered prices (by context length) go through the table every time.
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import Any

from genai_prices import Usage, calc_price

__all__ = ("price_tokens",)

_PER_MTOK = Decimal(1_000_000)


def price_tokens(model: str, provider: str, input_tokens: int, output_tokens: int) -> float | None:
    """USD for the tokens, or None when the table does not know the model."""
    if not model:
        return None
    entry = _price_entry(model, provider)
    if entry is None:
        return None
    provider_id, flat = entry
    if flat is not None:
        input_mtok, output_mtok = flat
        return float((input_tokens * input_mtok + output_tokens * output_mtok) / _PER_MTOK)
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    return float(calc_price(usage, model_ref=model, provider_id=provider_id).total_price)


@lru_cache(maxsize=1024)
def _price_entry(
    model: str, provider: str
) -> tuple[str | None, tuple[Decimal, Decimal] | None] | None:
    """(provider id to ask the table with, flat (input, output) USD per million tokens or None
    if tiered), or None if the table knows no such model. gen_ai.provider.name values such as
    "gcp.gemini" are not always the table's provider ids, so the model name alone is tried too."""
    usage = Usage(input_tokens=0, output_tokens=0)
    for provider_id in dict.fromkeys((provider or None, None)):
        try:
            found = calc_price(usage, model_ref=model, provider_id=provider_id)
        except LookupError:
            continue
        return provider_id, _flat(found.model_price)
    return None


def _flat(model_price: Any) -> tuple[Decimal, Decimal] | None:
    input_mtok = getattr(model_price, "input_mtok", None)
    output_mtok = getattr(model_price, "output_mtok", None)
    if isinstance(input_mtok, Decimal) and isinstance(output_mtok, Decimal):
        return input_mtok, output_mtok
    return None
