"""The MCP failure rules, one row per rule, for both spellings of the `mcp` package."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPError

from breaker_panel import ToolFailure
from breaker_panel.integrations.mcp import McpClassifier, refusal_result, result_is_error


def result(text: str, *, error: bool = True) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def v1_result(text: str) -> Any:
    """The shape of an mcp 1.x CallToolResult: `isError`, content blocks with `.text`."""
    return SimpleNamespace(isError=True, content=[SimpleNamespace(type="text", text=text)])


RESULTS = [
    ("a success", result("42", error=False), None),
    ("a 5xx status", result("HTTP 503 from the vendor"), True),
    ("a timeout", result("Request timed out"), True),
    ("timeout spelled as one word", result("upstream timeout"), True),
    ("unavailable", result("Service Unavailable"), True),
    ("a rate limit", result("rate limit exceeded, retry later"), True),
    ("429", result("got 429 Too Many Requests"), True),
    ("no results", result("no results for 'zzz'"), False),
    ("bad arguments", result("query must be under 256 characters"), False),
    ("a 4xx status is semantic", result("HTTP 404 not found"), False),
    ("an empty error", result(""), False),
    ("mcp 1.x spelling", v1_result("503 Service Unavailable"), True),
    ("a JSON dict", {"isError": True, "content": [{"type": "text", "text": "bad id"}]}, False),
    # What real servers send (tests/mcp/test_real_servers.py runs each against the server).
    ("mcp 2.x crash", result("Error executing tool web_search"), True),
    ("mcp 2.x nested crash", result("Error executing tool a: Error executing tool b"), True),
    ("mcp 2.x ToolError", result("Error executing tool a: no results for 'x'"), False),
    (
        "validation, even with 503 in the value",
        result("Error executing tool a: 1 validation error for aArguments n input_value='503'"),
        False,
    ),
    ("mcp 1.x crash: a KeyError", result("Error executing tool a: 'x'"), True),
    ("mcp 1.x crash: an OSError", result("Error executing tool a: [Errno 111] refused"), True),
    ("mcp 1.x ToolError naming a 503", result("Error executing tool a: upstream 503"), True),
    ("TypeScript crash", result("Cannot read properties of undefined (reading 'x')"), True),
    ("TypeScript McpError", result("MCP error -32603: index rebuilding"), True),
    ("TypeScript bad arguments", result("MCP error -32602: Input validation error: n"), False),
    ("a quoted word inside a sentence", result("no page named 'x'"), False),
]


@pytest.mark.parametrize(("case", "answer", "retryable"), RESULTS, ids=[r[0] for r in RESULTS])
def test_results_are_classified(case: str, answer: Any, retryable: bool | None) -> None:
    failure = McpClassifier().result(answer)
    if retryable is None:
        assert failure is None
    else:
        assert failure is not None and failure.retryable is retryable


ERRORS = [
    ("a timeout", TimeoutError("read timed out"), True),
    ("a connection error", ConnectionResetError("reset by peer"), True),
    ("the connection closed", MCPError(-32000, "Connection closed"), True),
    ("the server's internal error", MCPError(types.INTERNAL_ERROR, "crashed"), True),
    ("invalid params: the call's fault", MCPError(types.INVALID_PARAMS, "bad args"), False),
    ("an unknown exception", RuntimeError("boom"), True),
    ("a semantic ToolFailure is kept", ToolFailure("no such page", retryable=False), False),
]


@pytest.mark.parametrize(("case", "error", "retryable"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_are_classified(case: str, error: BaseException, retryable: bool) -> None:
    assert McpClassifier().error(error).retryable is retryable


def test_retryable_patterns_are_configurable() -> None:
    classifier = McpClassifier([r"quota"])
    assert classifier.result(result("quota exhausted")).retryable  # type: ignore[union-attr]
    assert not classifier.result(result("503 Service Unavailable")).retryable  # type: ignore[union-attr]
    assert not McpClassifier([]).result(result("503")).retryable  # type: ignore[union-attr]
    # A 2.x crash hides its message: no pattern is needed to see it.
    assert McpClassifier([]).result(result("Error executing tool a")).retryable  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="not a regular expression"):
        McpClassifier(["(unclosed"])


def test_a_refusal_is_an_error_result_of_the_installed_mcp() -> None:
    refusal = refusal_result("web_search is unavailable")
    assert isinstance(refusal, types.CallToolResult)
    assert result_is_error(refusal) and refusal.content[0].text == "web_search is unavailable"  # type: ignore[union-attr]
