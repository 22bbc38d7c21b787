"""A labelled set of tool results for the result checks: healthy traffic (legitimately empty
answers included) and failures of each kind. Shared by tests/sdk/test_result_check_corpus.py and
bench/bench_result_checks.py, which report false opens and recall per kind.

Every item is written out, not sampled from a generator that also decides its label: the label
is what an operator reading the result would say, not what a check computes.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from breaker_panel.result_checks import ResultChecker, ResultChecks

__all__ = ["HEALTHY", "KINDS", "Labelled", "checker", "failures", "healthy"]

HEALTHY = "healthy"
KINDS = ("empty", "error_body", "schema", "stale")

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["city", "temperature_c", "conditions"],
    "properties": {
        "city": {"type": "string"},
        "temperature_c": {"type": "number"},
        "conditions": {"type": "string"},
        "alerts": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Labelled:
    tool: str
    result: Any
    arguments: Mapping[str, Any] | None
    label: str  # HEALTHY or one of KINDS


def checker() -> ResultChecker:
    """The configuration an operator of these tools would write."""
    return ResultChecker(
        {
            "web_search": ResultChecks(no_results=(r"no results( found)?\.?",)),
            # "No flights on that date" is an answer: the tool declares a healthy empty answer.
            "flights": ResultChecks(empty_is_healthy=True),
            "calendar": ResultChecks(empty_is_healthy=True),
            "weather": ResultChecks(output_schema=WEATHER_SCHEMA),
            "inventory": ResultChecks(empty_pointers=("/items",)),
        }
    )


_TOPICS = [
    "circuit breakers",
    "rate limiting in APIs",
    "the 2019 service outage at a cloud vendor",
    "prompt caching",
    "Redis Lua scripts",
    "PostgreSQL advisory locks",
    "htmx polling",
    "JSON Schema draft 2020-12",
    "exponential backoff",
    "idempotency keys",
    "OpenTelemetry spans",
    "token buckets",
    "GCRA",
    "Django template partials",
    "Celery beat",
    "SSE streams",
    "quota management for LLM APIs",
    "service unavailable errors explained",
    "retry storms",
    "bulkheads",
    "health checks",
    "load shedding",
    "consistent hashing",
    "vector clocks",
]
_CITIES = ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Perth", "Quito", "Tunis", "Hanoi"]


def _search_page(topic: str, n: int) -> dict[str, Any]:
    return {
        "query": topic,
        "results": [
            {
                "title": f"{topic.title()} — part {i + 1}",
                "url": f"https://example.org/{topic.replace(' ', '-')}/{i}",
                "snippet": f"An explanation of {topic}, section {i + 1}: what it is and when the "
                "service returns errors such as 429 rate limited or 503 unavailable.",
            }
            for i in range(n)
        ],
        "total": n,
    }


def healthy() -> list[Labelled]:
    """At least 200 healthy results, including answers that are rightly empty."""
    items: list[Labelled] = []
    for i, topic in enumerate(_TOPICS):
        items.append(Labelled("web_search", _search_page(topic, 1 + i % 5), {"q": topic}, HEALTHY))
        text = f"Top result for {topic}: a long article about {topic}, updated {2020 + i % 6}."
        items.append(Labelled("web_search", text, {"q": topic + " summary"}, HEALTHY))
        mcp = {"content": [{"type": "text", "text": f"{topic}: 3 sources found, see below."}]}
        items.append(Labelled("web_search", mcp, {"q": topic + " sources"}, HEALTHY))
    # Short answers repeat for different questions and are still answers (no stale check).
    for a, b in itertools.islice(itertools.product(range(1, 9), range(1, 9)), 40):
        items.append(Labelled("calculator", str(a + b), {"expr": f"{a}+{b}"}, HEALTHY))
    # Legitimately empty: the flights and calendar tools declare it.
    for i, city in enumerate(_CITIES):
        day = f"2026-12-{10 + i:02d}"
        items.append(Labelled("flights", {"flights": []}, {"to": city, "on": day}, HEALTHY))
        items.append(Labelled("flights", "No flights on that date.", {"to": city}, HEALTHY))
        items.append(Labelled("flights", [], {"to": city, "on": day, "class": "first"}, HEALTHY))
        flight = {"flights": [{"no": f"TP{100 + i}", "to": city, "departs": f"{day}T09:{i}0"}]}
        items.append(Labelled("flights", flight, {"to": city, "on": day}, HEALTHY))
        items.append(Labelled("calendar", {"events": [], "total": 0}, {"day": day}, HEALTHY))
        items.append(Labelled("calendar", "", {"day": day, "owner": city}, HEALTHY))
    for i, city in enumerate(_CITIES * 2):
        structured = {"city": city, "temperature_c": 10.5 + i, "conditions": "clear"}
        if i % 3 == 0:
            structured["alerts"] = ["wind"]
        result = {
            "content": [{"type": "text", "text": f"{city}: {10.5 + i} °C, clear"}],
            "structuredContent": structured,
            "isError": False,
        }
        items.append(Labelled("weather", result, {"city": city, "i": i}, HEALTHY))
    # Fields that look like failures and are not: a status that is fine, a zero, a false.
    for i in range(20):
        items.append(
            Labelled(
                "inventory",
                {"items": [{"sku": f"A{i}", "count": i % 4}], "status": "ok"},
                {"sku": f"A{i}"},
                HEALTHY,
            )
        )
        items.append(Labelled("inventory_flag", {"in_stock": False}, {"sku": f"B{i}"}, HEALTHY))
        items.append(Labelled("thermometer", {"temperature": 0}, {"probe": i}, HEALTHY))
        items.append(Labelled("users", {"status": "active", "user": {"id": i}}, {"id": i}, HEALTHY))
    # Long answers that talk about errors are not error answers.
    for topic in _TOPICS[:10]:
        text = (
            f"Guide to {topic}. When an API is rate limited it answers 429 Too Many Requests; "
            "clients should back off and try again later. A service unavailable (503) answer "
            "means the server is overloaded. " * 3
        )
        items.append(Labelled("docs", text, {"topic": topic}, HEALTHY))
    # The same long answer to the same question twice is not stale.
    page = _search_page("circuit breakers", 3)
    items += [Labelled("web_search", page, {"q": "circuit breakers"}, HEALTHY)] * 4
    return items


def failures() -> dict[str, list[list[Labelled]]]:
    """Per kind, sequences of calls of one tool (a sequence matters for `stale`)."""
    empty_results: list[Any] = [
        "",
        "   ",
        [],
        {},
        None,
        {"results": [], "total": 0},
        {"results": []},
        {"content": []},
        {"content": [{"type": "text", "text": ""}]},
        "No results found.",
        "no results",
        b"",
        {"data": [], "next": None},
        "[]",
        "{}",
    ]
    empty = [
        [Labelled("web_search", r, {"q": f"q{i}"}, "empty")] for i, r in enumerate(empty_results)
    ]
    empty += [[Labelled("inventory", {"items": [], "status": "ok"}, {"sku": "Z"}, "empty")]]
    error_results: list[Any] = [
        {"error": "rate limited"},
        {"error": {"code": 429, "message": "Too Many Requests"}},
        {"status": "error", "message": "upstream timed out"},
        {"status": 503, "message": "Service Unavailable"},
        {"errors": [{"message": "quota exceeded for project"}]},
        "Rate limit exceeded. Try again later.",
        "Error: quota exceeded for this API key",
        "503 Service Unavailable",
        {"message": "Service temporarily unavailable"},
        {"content": [{"type": "text", "text": '{"error": "upstream timeout"}'}], "isError": False},
        {"content": [{"type": "text", "text": "You exceeded your current quota."}]},
        '{"status": "failed", "detail": "backend down"}',
        {"detail": "Too many requests, slow down"},
        "Internal server error",
        {"error_message": "The search backend is unavailable"},
    ]
    error_body = [
        [Labelled("web_search", r, {"q": f"e{i}"}, "error_body")]
        for i, r in enumerate(error_results)
    ]
    bad_weather: list[dict[str, Any]] = [
        {"city": "Oslo"},
        {"city": "Oslo", "temperature_c": "cold", "conditions": "snow"},
        {"city": 7, "temperature_c": 1, "conditions": "snow"},
        {"city": "Oslo", "temperature_c": 1, "conditions": "snow", "alerts": "wind"},
        {"city": "Oslo", "temperature_c": 1, "conditions": "snow", "humidity": 80},
        {"temp": 1},
        {"city": "Oslo", "temperature_c": None, "conditions": "snow"},
        {"city": "Oslo", "temperature_c": 1, "conditions": ["snow"]},
    ]
    schema = [
        [
            Labelled(
                "weather",
                {"content": [{"type": "text", "text": "Oslo"}], "structuredContent": s},
                {"city": "Oslo", "n": i},
                "schema",
            )
        ]
        for i, s in enumerate(bad_weather)
    ]
    stale: list[list[Labelled]] = []
    for n, topic in enumerate(_TOPICS[:6]):
        cached = _search_page(topic, 4)  # a cache serving one page to every query
        calls = [Labelled("news", cached, {"q": f"{topic} {k}"}, HEALTHY) for k in range(2)]
        calls += [Labelled("news", cached, {"q": f"{topic} {k}"}, "stale") for k in range(2, 6)]
        stale.append([Labelled(f"news{n}", c.result, c.arguments, c.label) for c in calls])
    return {"empty": empty, "error_body": error_body, "schema": schema, "stale": stale}


def shuffled_healthy(seed: int = 25) -> Iterator[Labelled]:
    items = healthy()
    random.Random(seed).shuffle(items)
    yield from items


@dataclass(frozen=True)
class Evaluation:
    healthy: int  # healthy results played
    false_degraded: int  # healthy results a check called degraded
    false_opens: int  # tools a worker breaker opened on healthy traffic alone
    recall: dict[str, float]  # per kind: failures called degraded by the right check
    counted: dict[str, int]  # per kind: how many failures were labelled


def evaluate() -> Evaluation:
    """Play the healthy traffic through one worker's breakers with the checks on, then each
    failure sequence through a fresh checker; count false opens and recall per kind."""
    from breaker_panel import WorkerBreakers

    worker = WorkerBreakers()
    run = worker.start_run()
    check = checker()
    played = false_degraded = 0
    for item in shuffled_healthy():
        played += 1
        verdict = check.check(item.tool, item.result, item.arguments)
        false_degraded += verdict.failure() is not None
        failure = verdict.failure()
        if failure is None:
            run.record_success(item.tool)
        else:
            run.record_failure(item.tool, failure)
    recall: dict[str, float] = {}
    counted: dict[str, int] = {}
    for kind, sequences in failures().items():
        caught = total = 0
        for sequence in sequences:
            fresh = checker()
            for item in sequence:
                verdict = fresh.check(item.tool, item.result, item.arguments)
                if item.label == kind:
                    total += 1
                    caught += verdict.check == kind and verdict.failure() is not None
        recall[kind], counted[kind] = caught / total, total
    return Evaluation(played, false_degraded, len(worker.open_tools()), recall, counted)
