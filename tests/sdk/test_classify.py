"""classify(): every rule of issue 12 §2, one row each, with real clients where installed.

The OpenAI client, httpx and requests are dev dependencies (through the framework packages);
aiohttp and Anthropic are not, so they are stood in for by classes with their names and
attributes: classify() duck-types them and imports none.
"""

from __future__ import annotations

import json
import urllib.error
from email.message import Message

import httpx
import openai
import pydantic
import pytest
import requests

from breaker_panel import (
    ControlPlane,
    Outcome,
    PlaneConfig,
    ToolBreaker,
    ToolFailure,
    WorkerBreakers,
    classify,
)
from breaker_panel.core import describe_failure

REQUEST = httpx.Request("GET", "https://vendor.example/search")


def httpx_status(code: int) -> httpx.HTTPStatusError:
    response = httpx.Response(code, request=REQUEST)
    return httpx.HTTPStatusError(f"{code} from vendor", request=REQUEST, response=response)


def requests_status(code: int) -> requests.HTTPError:
    response = requests.Response()
    response.status_code = code
    return requests.HTTPError(f"{code} from vendor", response=response)


def urllib_status(code: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("https://vendor.example", code, "vendor says no", Message(), None)


def openai_status(code: int) -> openai.APIStatusError:
    response = httpx.Response(code, request=REQUEST)
    return openai.APIStatusError(f"Error code: {code}", response=response, body=None)


class ClientResponseError(Exception):  # aiohttp's, by name and attribute
    def __init__(self, status: int) -> None:
        super().__init__(f"{status}, message='vendor says no'")
        self.status = status


class ServerDisconnectedError(Exception):  # aiohttp's
    pass


class APIStatusError(Exception):  # anthropic's
    def __init__(self, status_code: int) -> None:
        super().__init__(f"Error code: {status_code}")
        self.status_code = status_code


class APIConnectionError(Exception):  # anthropic's
    pass


class ValueErrorTimeout(ValueError):  # a library timeout that is also a ValueError
    pass


class ToolCrashed(Exception):
    pass


class Model(pydantic.BaseModel):
    limit: int


def pydantic_error() -> pydantic.ValidationError:
    try:
        Model.model_validate({"limit": "many"})
    except pydantic.ValidationError as error:
        return error
    raise AssertionError("unreachable")


def json_error() -> json.JSONDecodeError:
    try:
        json.loads("<html><body>502 Bad Gateway</body></html>")
    except json.JSONDecodeError as error:
        return error
    raise AssertionError("unreachable")


def wrapped(cause: BaseException) -> Exception:
    try:
        raise ToolCrashed("search failed") from cause
    except ToolCrashed as error:
        return error


RETRYABLE = Outcome.RETRYABLE
SEMANTIC = Outcome.SEMANTIC

RULES: list[tuple[str, object, Outcome]] = [
    # timeouts and connection errors
    ("builtin TimeoutError", TimeoutError("timed out"), RETRYABLE),
    ("ConnectionResetError", ConnectionResetError("reset"), RETRYABLE),
    ("httpx ConnectTimeout", httpx.ConnectTimeout("connect timeout"), RETRYABLE),
    ("httpx ReadTimeout", httpx.ReadTimeout("read timeout"), RETRYABLE),
    ("httpx ConnectError", httpx.ConnectError("refused"), RETRYABLE),
    ("httpx RemoteProtocolError", httpx.RemoteProtocolError("eof"), RETRYABLE),
    ("requests Timeout", requests.Timeout("read timeout"), RETRYABLE),
    ("requests ConnectionError", requests.ConnectionError("refused"), RETRYABLE),
    ("urllib URLError", urllib.error.URLError("no route"), RETRYABLE),
    ("aiohttp ServerDisconnectedError", ServerDisconnectedError(), RETRYABLE),
    ("openai APITimeoutError", openai.APITimeoutError(request=REQUEST), RETRYABLE),
    ("openai APIConnectionError", openai.APIConnectionError(request=REQUEST), RETRYABLE),
    ("anthropic APIConnectionError", APIConnectionError("refused"), RETRYABLE),
    ("a timeout that is also a ValueError", ValueErrorTimeout("slow"), RETRYABLE),
    # HTTP statuses, per client
    *[
        (f"{client} {code}", make(code), RETRYABLE)
        for code in (401, 403, 408, 425, 429, 500, 502, 503, 504)
        for client, make in (
            ("httpx", httpx_status),
            ("requests", requests_status),
            ("urllib", urllib_status),
            ("openai", openai_status),
            ("aiohttp", ClientResponseError),
            ("anthropic", APIStatusError),
        )
    ],
    *[
        (f"{client} {code}", make(code), SEMANTIC)
        for code in (400, 404, 409, 413, 422)
        for client, make in (
            ("httpx", httpx_status),
            ("requests", requests_status),
            ("urllib", urllib_status),
            ("openai", openai_status),
            ("aiohttp", ClientResponseError),
            ("anthropic", APIStatusError),
        )
    ],
    # decode errors are ValueErrors, but a vendor's HTML error page is not an answer
    ("JSONDecodeError", json_error(), RETRYABLE),
    ("UnicodeDecodeError", UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid"), RETRYABLE),
    ("requests JSONDecodeError", requests.JSONDecodeError("bad", "<html>", 0), RETRYABLE),
    # the call's own arguments
    ("ValueError", ValueError("query must be under 256 characters"), SEMANTIC),
    ("TypeError", TypeError("limit must be an int"), SEMANTIC),
    ("KeyError", KeyError("sku"), SEMANTIC),
    ("IndexError", IndexError("page 9 of 3"), SEMANTIC),
    ("pydantic ValidationError", pydantic_error(), SEMANTIC),
    # ToolFailure says it itself
    ("ToolFailure retryable", ToolFailure("503", retryable=True), RETRYABLE),
    ("ToolFailure semantic", ToolFailure("400", retryable=False), SEMANTIC),
    # unknown: retryable, a tool that keeps raising is broken
    ("RuntimeError", RuntimeError("boom"), RETRYABLE),
    ("a plain string", "it broke", RETRYABLE),
    ("None", None, RETRYABLE),
    # a wrapper is judged by its explicit cause
    ("wrapped 400", wrapped(httpx_status(400)), SEMANTIC),
    ("wrapped timeout", wrapped(TimeoutError()), RETRYABLE),
    ("wrapped ValueError", wrapped(ValueError("bad")), SEMANTIC),
]


@pytest.mark.parametrize(
    ("error", "expected"), [row[1:] for row in RULES], ids=[r[0] for r in RULES]
)
def test_every_rule(error: BaseException | str | None, expected: Outcome) -> None:
    failure = classify(error)
    assert isinstance(failure, ToolFailure)
    assert failure.outcome is expected
    assert describe_failure(error).outcome is expected


def test_a_tool_failure_is_returned_as_it_is() -> None:
    failure = ToolFailure("503", attempts=4)
    assert classify(failure) is failure


def test_the_message_names_the_type_and_the_cause_is_kept() -> None:
    error = ValueError("query must be under 256 characters")
    failure = classify(error)
    assert failure.message == "ValueError: query must be under 256 characters"
    assert failure.__cause__ is error
    assert describe_failure(error).error == "ValueError: query must be under 256 characters"


def test_a_property_that_raises_does_not_break_classification() -> None:
    class Weird(Exception):
        @property
        def status_code(self) -> int:
            raise RuntimeError("no response yet")

    assert classify(Weird("x")).retryable is True


def test_a_models_bad_arguments_no_longer_open_the_worker_breaker() -> None:
    worker = WorkerBreakers()
    runs = [worker.start_run() for _ in range(6)]
    for run in runs:
        run.record_failure("web_search", ValueError("query must be under 256 characters"))
    assert not worker.is_open("web_search")
    assert runs[0].available([{"name": "web_search"}]) == [{"name": "web_search"}]


def always_semantic(error: BaseException | str | None) -> ToolFailure:
    return ToolFailure(str(error), retryable=False)


def test_a_users_classifier_decides_for_the_tool_breaker() -> None:
    breaker = ToolBreaker(classify=always_semantic)
    for _ in range(10):
        breaker.record_failure("web_search", TimeoutError("slow"))
    assert not breaker.is_open("web_search")
    assert breaker.semantic_strikes()[0].count == 10


def test_a_users_classifier_decides_for_the_worker_and_its_runs() -> None:
    worker = WorkerBreakers(classify=always_semantic)
    run = worker.start_run()
    for _ in range(10):
        run.record_failure("web_search", TimeoutError("slow"))
    assert not worker.is_open("web_search")


def test_a_users_classifier_decides_for_a_control_plane_run() -> None:
    plane = ControlPlane(
        "http://127.0.0.1:9",
        token="t",
        worker_id="w",
        config=PlaneConfig(classify=always_semantic),
        start=False,
    )
    run = plane.start_run(agent="a")
    info = run.record_failure("web_search", TimeoutError("slow"))
    assert info.outcome is Outcome.SEMANTIC
    assert plane.worker.consecutive("web_search") == 0
    plane.close(timeout=0)


def test_a_classifier_that_returns_something_else_is_a_clear_error() -> None:
    breaker = ToolBreaker(classify=lambda error: "retryable")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="must return a ToolFailure"):
        breaker.record_failure("web_search", TimeoutError())
