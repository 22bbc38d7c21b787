"""The replay's prompt caches: each model call of a replayed mode priced with a provider's
caching rule and `genai-prices`' cache rates, so a way of taking a tool away that breaks the
cached prefix shows in the spend.

A run's prompt is, in order: the tools array, the system prompt, the run's task, one block per
step already taken (its tool call and result), and, while a tool is gone, the notice. What is
cached is a prefix of that; which prefixes, for how long and at what price is the provider's:

- Anthropic: prefix order tools -> system -> messages, explicit cache breakpoints (the agent
  sets one after the system prompt, shared by every run, and one after its newest step), a
  write costs the cache-write rate (1.25x input), a read the cache-read rate (0.1x), a prefix
  under the model's minimum (1,024 tokens) is not cached, an entry lives 5 minutes from its
  last use. A lookup finds the longest live prefix ending at a block boundary.
- OpenAI: automatic for prompts of 1,024 tokens or more, every prefix of an earlier prompt is
  cached (in 128-token steps) at no write premium, a read costs the model's cached-input rate;
  5 minutes of lifetime is assumed (OpenAI says 5-10 minutes idle).

In both, a changed tools array changes the prefix from its first token: nothing cached before
the change is read after it. Rates come from `genai-prices` for a real model of each provider;
nothing here is a price.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

from genai_prices import Usage, calc_price

__all__ = (
    "PROVIDERS",
    "CacheMeter",
    "PromptCall",
    "PromptLayout",
    "Provider",
    "cache_summary",
    "meter_calls",
    "price_call",
)


@dataclass(frozen=True)
class Provider:
    """A provider's prompt-caching rule and the real model whose rates price it."""

    name: str  # "anthropic" | "openai": also the tools shape its runs send
    model: str  # a model id genai-prices knows
    min_prefix_tokens: int
    lifetime_s: float  # simulated seconds an entry lives after its last use
    explicit: bool  # Anthropic: breakpoints, writes priced; OpenAI: automatic, no write premium
    granularity: int  # cached prefixes are a multiple of this many tokens (OpenAI: 128)

    def rule(self) -> str:
        """The caching rule in words, printed beside the figures."""
        rates = rates_of(self)
        if self.explicit:
            how = (
                f"explicit breakpoints after the system prompt and the newest step; writes at "
                f"{rates['write']:g}x input, reads at {rates['read']:g}x"
            )
        else:
            how = (
                f"automatic for prompts of {self.min_prefix_tokens}+ tokens in "
                f"{self.granularity}-token steps; reads at {rates['read']:g}x input, no write "
                "premium"
            )
        return (
            f"{self.name} ({self.model}, genai-prices): prefix tools -> system -> messages; "
            f"{how}; minimum prefix {self.min_prefix_tokens} tokens; entries live "
            f"{self.lifetime_s / 60:g} min from last use"
        )


PROVIDERS: dict[str, Provider] = {
    # The scenario's $5/$25 per million tokens are Claude Opus 4.5's.
    "anthropic": Provider("anthropic", "claude-opus-4-5", 1024, 300.0, True, 1),
    "openai": Provider("openai", "gpt-5", 1024, 300.0, False, 128),
}


@dataclass(frozen=True)
class PromptLayout:
    """Token sizes of a prompt's parts. Defaults add up to the scenario's 4,000 tokens at the
    first step (two tools of 600, a system prompt of 2,300, a task of 500) and 700 per step."""

    tool_tokens: int = 600  # each tool's definition
    system_tokens: int = 2300
    task_tokens: int = 500
    step_tokens: int = 700
    notice_tokens: int = 60

    def blocks(self, call: PromptCall) -> list[int]:
        """The prompt's cacheable blocks, in order: tools, system, task, each step taken."""
        tools = self.tool_tokens * len(call.tools)
        return [tools, self.system_tokens, self.task_tokens] + [self.step_tokens] * call.history

    def input_tokens(self, call: PromptCall) -> int:
        return sum(self.blocks(call)) + (self.notice_tokens if call.notice else 0)


@dataclass(frozen=True)
class PromptCall:
    """One model call as a prompt cache sees it."""

    at_s: float  # simulated seconds
    run: float  # which run, by its start (its private prefix: task and steps)
    tools: tuple[str, ...]  # the tools array sent, by name, in order
    history: int  # steps already taken (blocks after the task)
    notice: bool
    output_tokens: int


@dataclass(frozen=True)
class CachedUsage:
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int


@dataclass
class CacheMeter:
    """One organisation's prompt cache at one provider: every run of a mode shares it."""

    provider: Provider
    layout: PromptLayout = field(default_factory=PromptLayout)
    _expires: dict[tuple[Any, ...], float] = field(default_factory=dict)

    def call(self, call: PromptCall) -> CachedUsage:
        """Look the call's prompt up, then leave in the cache what the provider would."""
        blocks = self.layout.blocks(call)
        ends = _cumulative(blocks)
        keys = [self._key(call, k) for k in range(1, len(blocks) + 1)]
        hit = 0  # blocks read from the cache
        for k in range(len(blocks), 0, -1):
            if (
                self._live(keys[k - 1], call.at_s)
                and ends[k - 1] >= self.provider.min_prefix_tokens
            ):
                hit = k
                break
        read = ends[hit - 1] if hit else 0
        read -= read % self.provider.granularity
        for k in range(1, hit + 1):
            self._expires[keys[k - 1]] = call.at_s + self.provider.lifetime_s  # refreshed
        write = self._store(call, keys, ends, hit) if self.provider.explicit else 0
        if not self.provider.explicit:
            for k in range(1, len(blocks) + 1):
                self._expires[keys[k - 1]] = call.at_s + self.provider.lifetime_s
        return CachedUsage(self.layout.input_tokens(call), read, write, call.output_tokens)

    def _store(
        self, call: PromptCall, keys: list[tuple[Any, ...]], ends: list[int], hit: int
    ) -> int:
        """Anthropic: write the prefixes at the breakpoints (after the system prompt, after the
        newest block); the tokens between what was read and the last breakpoint are written."""
        written = 0
        for k in sorted({2, len(keys)}):
            if k <= hit or ends[k - 1] < self.provider.min_prefix_tokens:
                continue
            self._expires[keys[k - 1]] = call.at_s + self.provider.lifetime_s
            written = ends[k - 1]
        read_end = ends[hit - 1] if hit else 0
        return max(0, written - read_end)

    def _live(self, key: tuple[Any, ...], at_s: float) -> bool:
        expires = self._expires.get(key)
        return expires is not None and at_s < expires

    @staticmethod
    def _key(call: PromptCall, blocks: int) -> tuple[Any, ...]:
        # The first two blocks (tools, system) are the same for every run sending that array.
        return (call.tools, blocks) if blocks <= 2 else (call.tools, blocks, call.run)


def _cumulative(sizes: Sequence[int]) -> list[int]:
    total, ends = 0, []
    for size in sizes:
        total += size
        ends.append(total)
    return ends


def meter_calls(
    calls: Iterable[PromptCall], provider: Provider, layout: PromptLayout | None = None
) -> list[tuple[PromptCall, CachedUsage]]:
    """Every call of a mode through one shared cache, in the order they were made."""
    meter = CacheMeter(provider, layout or PromptLayout())
    ordered = sorted(calls, key=lambda c: (c.at_s, c.run, c.history))
    return [(call, meter.call(call)) for call in ordered]


@lru_cache(maxsize=4096)
def price_call(provider: Provider, usage: CachedUsage) -> Decimal:
    """USD for one call from genai-prices' rates for the provider's model."""
    return calc_price(
        Usage(
            input_tokens=usage.input_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
        ),
        model_ref=provider.model,
        provider_id=provider.name,
    ).total_price


@lru_cache(maxsize=8)
def rates_of(provider: Provider) -> dict[str, float]:
    """Cache read and write rates as multiples of the input rate (from genai-prices)."""
    million = 1_000_000
    plain = price_call(provider, CachedUsage(million, 0, 0, 0))
    read = price_call(provider, CachedUsage(million, million, 0, 0))
    write = price_call(provider, CachedUsage(million, 0, million, 0)) if provider.explicit else 0
    return {"read": float(read / plain), "write": float(Decimal(write) / plain)}


def cache_summary(
    calls_by_run: Sequence[tuple[bool, Sequence[PromptCall]]],
    *,
    provider: Provider,
    outage: tuple[float, float],
    layout: PromptLayout | None = None,
) -> dict[str, Any]:
    """Spend and cached-input share of one replayed mode at ``provider``. ``calls_by_run``:
    each run's model calls, with whether the run started in the outage window (whose spend
    is counted, as the replay's other figures are). Shares are of the input tokens of the calls
    made before the outage and during it, whoever made them."""
    in_window = {id(c) for started_in, calls in calls_by_run if started_in for c in calls}
    metered = meter_calls((c for _, calls in calls_by_run for c in calls), provider, layout)
    spend = uncached = Decimal(0)
    tokens = {"pre": [0, 0], "outage": [0, 0]}  # [input, cache read]
    reads = writes = inputs = 0
    for call, usage in metered:
        period = "pre" if call.at_s < outage[0] else "outage" if call.at_s < outage[1] else None
        if period is not None:
            tokens[period][0] += usage.input_tokens
            tokens[period][1] += usage.cache_read_tokens
        if id(call) not in in_window:
            continue
        spend += price_call(provider, usage)
        plain = CachedUsage(usage.input_tokens, 0, 0, usage.output_tokens)
        uncached += price_call(provider, plain)
        inputs += usage.input_tokens
        reads += usage.cache_read_tokens
        writes += usage.cache_write_tokens
    pre = _share(*tokens["pre"])
    during = _share(*tokens["outage"])
    return {
        "provider": provider.name,
        "model": provider.model,
        "rule": provider.rule(),
        "spend_usd": float(spend),
        "spend_uncached_usd": float(uncached),
        "input_tokens": inputs,
        "cache_read_tokens": reads,
        "cache_write_tokens": writes,
        "cached_share_pre_outage": pre,
        "cached_share_outage": during,
        # The goal: the share during the outage at least 90% of the share before it.
        "cached_share_kept": None if not pre or during is None else during / pre,
    }


def _share(input_tokens: int, read_tokens: int) -> float | None:
    return read_tokens / input_tokens if input_tokens else None
