"""Each provider's prompt-caching rule, as its documentation stated it (checked December 2026):
what the pages print beside a cached share, so a figure is read with the rule that made it.

Prices are not here: cache reads and writes are priced from the genai-prices table
(``runs.pricing``). Keys are the table's provider ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from runs.pricing import table_provider

__all__ = ("CACHE_RULES", "CacheRule", "cache_rules_for", "cache_rules_for_models")


@dataclass(frozen=True, slots=True)
class CacheRule:
    provider: str  # the provider's name, for people
    minimum_prefix: str
    prefix_holds: str
    lifetime: str
    source: str  # where the rule is documented


CACHE_RULES: dict[str, CacheRule] = {
    "anthropic": CacheRule(
        provider="Anthropic",
        minimum_prefix="1,024 to 4,096 tokens, by model (below it nothing is cached, silently)",
        prefix_holds="tools, then system, then messages, up to a cache_control breakpoint: "
        "changing the tools array invalidates everything after it",
        lifetime="5 minutes from last use (1 hour on request, written at a higher rate)",
        source="https://platform.claude.com/docs/en/build-with-claude/prompt-caching",
    ),
    "openai": CacheRule(
        provider="OpenAI",
        minimum_prefix="1,024 tokens, then in 128-token steps; automatic, no opt-in",
        prefix_holds="the exact start of the request (tools, instructions, messages): "
        "tool_choice allowed_tools keeps the tools array, and so the cache, unchanged",
        lifetime="about 5-10 minutes idle, up to an hour off-peak (longer retention on request)",
        source="https://platform.openai.com/docs/guides/prompt-caching",
    ),
    "google": CacheRule(
        provider="Google Gemini",
        minimum_prefix="1,024 to 4,096 tokens, by model (implicit caching, Gemini 2.5 and newer)",
        prefix_holds="the start of the request: put large, common content first",
        lifetime="not stated for implicit caching; explicit caches default to 1 hour",
        source="https://ai.google.dev/gemini-api/docs/caching",
    ),
}


def cache_rules_for(providers: Iterable[str]) -> list[CacheRule]:
    """The rules of the providers given (the table's ids), each once, in the order given."""
    return [CACHE_RULES[p] for p in dict.fromkeys(providers) if p in CACHE_RULES]


def cache_rules_for_models(models: Iterable[str]) -> list[CacheRule]:
    """The rules of the providers the genai-prices table says sell these models."""
    return cache_rules_for(table_provider(model) for model in models if model)
