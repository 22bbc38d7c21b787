"""Model prices for spans that carry tokens but no cost: the ``genai-prices`` table."""

from __future__ import annotations

from functools import lru_cache

from genai_prices import Usage, calc_price

__all__ = ("price_tokens",)


def price_tokens(model: str, provider: str, input_tokens: int, output_tokens: int) -> float | None:
    """USD for the tokens, or None when the table does not know the model."""
    if not model or not _known(model, provider):
        return None
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    try:
        return float(calc_price(usage, model_ref=model, provider_id=provider or None).total_price)
    except LookupError:
        # gen_ai.provider.name values ("gcp.gemini", "aws.bedrock") are not always the table's
        # provider ids: let the table match the model name alone.
        return float(calc_price(usage, model_ref=model).total_price)


@lru_cache(maxsize=1024)
def _known(model: str, provider: str) -> bool:
    usage = Usage(input_tokens=0, output_tokens=0)
    for provider_id in (provider or None, None):
        try:
            calc_price(usage, model_ref=model, provider_id=provider_id)
        except LookupError:
            continue
        return True
    return False
