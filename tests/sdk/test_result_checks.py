"""Result checks: which returned calls are degraded, per tool, and what a check that cannot run
does (nothing: the call is recorded as it would be without checks, the result untouched)."""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import pytest

from breaker_panel import (
    ControlPlane,
    DegradedResult,
    Outcome,
    PlaneConfig,
    ResultChecker,
    ResultChecks,
    ToolBreaker,
    WorkerBreakers,
)
from breaker_panel.result_checks import CheckStatus, Verdict

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["city", "temperature_c"],
    "properties": {"city": {"type": "string"}, "temperature_c": {"type": "number"}},
}


def verdict(result: Any, checks: ResultChecks | None = None, arguments: Any = None) -> Verdict:
    return ResultChecker({"t": checks or ResultChecks()}).check("t", result, arguments)


@pytest.mark.parametrize(
    "result",
    ["", "  \n", [], {}, None, b"", {"results": [], "total": 0}, {"content": []}, "[]"],
    ids=repr,
)
def test_an_empty_result_is_degraded(result: Any) -> None:
    found = verdict(result)
    assert (found.status, found.check) == (CheckStatus.DEGRADED, "empty")
    assert found.reason == "returns empty results for every query"


@pytest.mark.parametrize(
    "result", ["4", {"temperature": 0}, {"in_stock": False}, [0], {"results": [{"t": 1}]}]
)
def test_small_answers_are_not_empty(result: Any) -> None:
    assert verdict(result).status is CheckStatus.PASSED


def test_a_configured_no_results_shape_is_empty() -> None:
    checks = ResultChecks(no_results=(r"nothing matched\.?",), empty_pointers=("/hits",))
    assert verdict("Nothing matched.", checks).check == "empty"
    assert verdict({"hits": [], "took_ms": 4}, checks).check == "empty"
    assert verdict({"hits": [{"id": 1}], "took_ms": 4}, checks).status is CheckStatus.PASSED


def test_a_tool_that_declares_a_healthy_empty_answer_has_its_checks_off() -> None:
    flights = ResultChecks(empty_is_healthy=True)
    assert verdict({"flights": []}, flights).status is CheckStatus.PASSED
    assert verdict({"error": "rate limited"}, flights).status is CheckStatus.PASSED
    # Turned back on explicitly: every check but the empty one.
    on = ResultChecks(empty_is_healthy=True, enabled=True)
    assert verdict([], on).status is CheckStatus.PASSED
    assert verdict({"error": "rate limited"}, on).check == "error_body"


def test_checks_can_be_turned_off_per_tool() -> None:
    checker = ResultChecker({"quiet": ResultChecks(enabled=False)})
    assert checker.check("quiet", "").status is CheckStatus.PASSED
    assert checker.check("other", "").status is CheckStatus.DEGRADED
    assert ResultChecker(default=None).check("other", "").status is CheckStatus.PASSED


@pytest.mark.parametrize(
    ("result", "said"),
    [
        ({"error": "rate limited"}, "rate limited"),
        ({"error": {"code": 429, "message": "Too Many Requests"}}, "Too Many Requests"),
        ({"status": "error", "message": "backend down"}, "backend down"),
        ({"status": 503}, "status 503"),
        ("Error: quota exceeded for this key", "quota exceeded"),
        ("503 Service Unavailable", "Service Unavailable"),
        ('{"error": "upstream timeout"}', "upstream timeout"),
        ({"content": [{"type": "text", "text": '{"error": "boom"}'}], "isError": False}, "boom"),
    ],
)
def test_an_error_in_a_successful_body_is_degraded(result: Any, said: str) -> None:
    found = verdict(result)
    assert found.check == "error_body"
    assert said in found.reason and found.reason.startswith("answers with an error")


@pytest.mark.parametrize(
    "result",
    [
        {"status": "ok", "items": [1]},
        {"error": None, "items": [1]},
        {"error": "", "items": [1]},
        "Top result for service outages: a review of rate limiting in 2019 outages.",
        "How to handle HTTP 429 rate limit errors: a guide. " * 10,
    ],
)
def test_error_words_that_are_not_an_error_answer_pass(result: Any) -> None:
    assert verdict(result).status is CheckStatus.PASSED


def test_error_patterns_and_fields_are_configurable() -> None:
    checks = ResultChecks(error_patterns=(r"kaputt",), error_fields=("fault",))
    assert verdict("kaputt: try later", checks).check == "error_body"
    assert verdict({"fault": "x"}, checks).check == "error_body"
    assert verdict("rate limited", checks).status is CheckStatus.PASSED
    with pytest.raises(ValueError, match="not a regular expression"):
        ResultChecks(error_patterns=("(",))
    with pytest.raises(ValueError, match="list of regular expressions"):
        ResultChecks(error_patterns="rate")  # type: ignore[arg-type]


def test_structured_content_that_breaks_the_output_schema_is_degraded() -> None:
    checks = ResultChecks(output_schema=SCHEMA)
    ok = {"content": [], "structuredContent": {"city": "Oslo", "temperature_c": 3}}
    bad = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"city": "Oslo"}}
    assert verdict(ok, checks).status is CheckStatus.PASSED
    found = verdict(bad, checks)
    assert found.check == "schema"
    assert "temperature_c" in found.reason and "output schema" in found.reason


def test_an_invalid_schema_could_not_check_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    checker = ResultChecker({"t": ResultChecks(output_schema={"type": 12})})
    result = {"content": [], "structuredContent": {"a": 1}}
    with caplog.at_level(logging.WARNING, logger="breaker_panel.result_checks"):
        first = checker.check("t", result)
        second = checker.check("t", result)
    assert first.status is second.status is CheckStatus.UNCHECKED
    assert "could not check" in first.reason and "invalid" in first.reason
    assert len(caplog.records) == 1


def test_the_same_long_answer_to_different_questions_is_stale() -> None:
    checker = ResultChecker({"news": ResultChecks(stale_after=3)})
    page = {"results": [{"title": "Yesterday's headline", "body": "the same page every time"}]}
    said = [checker.check("news", page, {"q": q}).check for q in ("a", "b", "c", "d")]
    assert said == ["", "", "stale", "stale"]
    assert checker.check("news", page, {"q": "d"}).status is CheckStatus.PASSED  # same question
    fresh = {"results": [{"title": "Today's headline", "body": "a new page at last"}]}
    assert checker.check("news", fresh, {"q": "e"}).status is CheckStatus.PASSED


def test_a_short_answer_repeated_is_not_stale() -> None:
    checker = ResultChecker()
    assert {checker.check("calc", "4", {"e": e}).status for e in ("2+2", "3+1", "1+3", "0+4")} == {
        CheckStatus.PASSED
    }


def test_a_custom_check_says_why_or_could_not_check(caplog: pytest.LogCaptureFixture) -> None:
    def stale_prices(result: Any, arguments: Any) -> str | None:
        return "returns yesterday's prices" if result.get("date") != "today" else None

    def broken(result: Any, arguments: Any) -> str | None:
        raise KeyError("boom")

    checker = ResultChecker(
        {"prices": ResultChecks(custom=stale_prices), "bad": ResultChecks(custom=broken)}
    )
    assert checker.check("prices", {"date": "yesterday"}).reason == "returns yesterday's prices"
    assert checker.check("prices", {"date": "today"}).status is CheckStatus.PASSED
    with caplog.at_level(logging.WARNING, logger="breaker_panel.result_checks"):
        found = checker.check("bad", {"date": "today"})
    assert found.status is CheckStatus.UNCHECKED and "KeyError" in found.reason


def deep(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"a": [value]}
    return value


@pytest.mark.parametrize(
    "result",
    [
        "x" * 10_000_000,
        b"x" * 10_000_000,
        "[" * 100_000 + "]" * 100_000,
        deep(100),
        b"\xff\xfe not utf-8",
        "lone surrogate \udc80",
        [{"n": i} for i in range(200_000)],
    ],
    ids=[
        "10MB text",
        "10MB bytes",
        "deep JSON text",
        "deep object",
        "bad UTF-8",
        "surrogate",
        "200k values",
    ],
)
def test_a_result_the_checks_cannot_read_is_unchecked_and_untouched(result: Any) -> None:
    before = copy.deepcopy(result) if not isinstance(result, (str, bytes)) else result
    breaker = ToolBreaker(threshold=1)
    found = breaker.record_result("t", result, arguments={"q": 1})
    assert found.status is CheckStatus.UNCHECKED and found.failure() is None
    assert "could not check" in found.reason
    assert breaker.available([{"name": "t"}]) == [{"name": "t"}]  # counted as nothing
    assert result == before


def test_a_degraded_result_counts_like_a_retryable_failure_and_names_its_reason() -> None:
    breaker = ToolBreaker()
    for _ in range(4):
        assert breaker.record_result("web_search", {"results": []}).check == "empty"
    assert breaker.consecutive("web_search") == 4
    breaker.record_result("web_search", {"results": [{"title": "found"}]})
    assert breaker.consecutive("web_search") == 0
    for _ in range(5):
        breaker.record_result("web_search", [])
    assert breaker.removals()["web_search"].reason == "5 consecutive degraded results"
    notice = breaker.notice()
    assert notice is not None
    assert "- web_search: it returns empty results for every query" in notice
    assert "Degraded:" not in notice


def test_a_tool_configured_not_to_count_reports_degraded_as_semantic() -> None:
    checks = ResultChecker({"web_search": ResultChecks(counts=False)})
    breaker = ToolBreaker(result_checks=checks)
    for _ in range(10):
        breaker.record_result("web_search", "")
    assert breaker.open_tools() == ()
    info = breaker.record_failure("web_search", DegradedResult("empty", counts=False))
    assert info.outcome is Outcome.SEMANTIC and info.error == "Degraded: empty"


def test_worker_scope_counts_degraded_results_across_runs() -> None:
    worker = WorkerBreakers()
    for _ in range(5):
        worker.start_run().record_result("web_search", {"error": "quota exceeded"})
    assert worker.state("web_search") == "open"
    assert worker.last_error("web_search").startswith("Degraded: answers with an error")


def test_a_control_plane_run_reports_a_degraded_call_with_its_reason() -> None:
    plane = ControlPlane(
        "http://127.0.0.1:9",
        token="t",
        worker_id="w",
        config=PlaneConfig(result_checks=ResultChecker({"calc": ResultChecks(enabled=False)})),
        start=False,
    )
    run = plane.start_run(agent="a")
    assert run.record_result("web_search", "", arguments={"q": "x"}).check == "empty"
    assert run.record_result("calc", "").status is CheckStatus.PASSED
    events = [event for event in plane.sender.buffered() if event.get("type") == "tool.call"]
    assert [(e["tool"], e["outcome"], e["error"]) for e in events] == [
        ("web_search", "degraded", "Degraded: returns empty results for every query"),
        ("calc", "success", ""),
    ]
    assert json.dumps(events)  # the events are plain JSON
    plane.close(timeout=0)


class Hostile:
    """A result whose own serialisation raises (a tool's pydantic-like object gone wrong)."""

    def model_dump(self, **_: Any) -> Any:
        raise ValueError("cannot serialise")


def test_a_result_whose_own_code_raises_is_unchecked_never_an_exception() -> None:
    found = ResultChecker().check("t", Hostile())
    assert found.status is CheckStatus.UNCHECKED and "cannot serialise" in found.reason
