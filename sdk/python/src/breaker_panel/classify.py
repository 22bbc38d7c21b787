"""What a failed tool call says about the tool: broken for everyone (retryable) or wrong this
time (semantic). `classify()` recognises the common HTTP clients by duck typing, importing none.

    retryable  timeouts, connection errors; HTTP 401, 403, 408, 425, 429 and 5xx; JSON and
               Unicode decode errors (an HTML error page is not an answer); ToolFailure(True)
    semantic   any other HTTP 4xx; ValueError, TypeError, LookupError and validation errors
               raised for the call's arguments; ToolFailure(retryable=False)
    unknown    retryable: a tool that keeps raising is broken, whatever the reason

A wrapper exception that is none of these is judged by its explicit cause (`raise ... from e`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from breaker_panel.vocabulary import Outcome

__all__ = [
    "DEGRADED_PREFIX",
    "RETRYABLE_STATUSES",
    "Classifier",
    "DegradedResult",
    "Failure",
    "ToolFailure",
    "classify",
    "exception_text",
    "http_status",
]


class ToolFailure(Exception):
    """An exhausted tool call: the transport layer has already retried `attempts` times.

    `retryable=True` is a transport failure (timeout, connection error, 5xx, 429 after retries)
    and counts towards opening the breaker; `retryable=False` is a semantic rejection (the
    arguments were wrong) and never does. Attempts are recorded, not counted: one exhausted
    call is one event however many HTTP attempts it made.
    """

    def __init__(self, message: str, retryable: bool = True, attempts: int = 1) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        super().__init__(message)
        self.message = message
        self.retryable = bool(retryable)
        self.attempts = attempts

    @property
    def outcome(self) -> Outcome:
        return Outcome.RETRYABLE if self.retryable else Outcome.SEMANTIC

    def __repr__(self) -> str:
        return (
            f"ToolFailure({self.message!r}, retryable={self.retryable}, attempts={self.attempts})"
        )


# The `error` of a degraded call starts with this, so every page (and the notice) can tell a
# result that failed a check from a transport error by the text alone.
DEGRADED_PREFIX = "Degraded: "


class DegradedResult(ToolFailure):
    """A call that returned, but whose result failed a result check (`breaker_panel.result_checks`).

    `reason` is written for a model and an operator alike ("returns empty results for every
    query"); `check` names the check ("empty", "error_body", "schema", "stale", or a user's).
    It counts towards opening the breaker exactly like a retryable failure; with
    `counts=False` (a tool configured so) it is reported as semantic: it neither counts nor
    resets, but its text still says it was degraded.
    """

    def __init__(self, reason: str, *, check: str = "custom", counts: bool = True) -> None:
        super().__init__(reason, retryable=counts, attempts=1)
        self.check = check
        self.counts = bool(counts)

    @property
    def outcome(self) -> Outcome:
        return Outcome.DEGRADED if self.counts else Outcome.SEMANTIC

    def __repr__(self) -> str:
        return f"DegradedResult({self.message!r}, check={self.check!r}, counts={self.counts})"


Failure = BaseException | str | None
Classifier = Callable[[Failure], ToolFailure]

# 401/403: a revoked or wrong key breaks the tool for every run, not just this call.
RETRYABLE_STATUSES = frozenset({401, 403, 408, 425, 429})
# Class names (anywhere in the MRO) of transport failures in httpx, requests, aiohttp, openai,
# anthropic...: some of them are also ValueErrors, and the transport meaning wins.
_TRANSPORT_NAME = re.compile(
    r"(Timeout|Connect|Connection|Network|Transport|RemoteProtocol|ServerDisconnected)"
    r"(Error|Exception)?$"
)
_DECODE_NAMES = frozenset({"JSONDecodeError", "UnicodeDecodeError"})
# pydantic's ValidationError, and Pydantic AI's ModelRetry (a tool asking for other arguments).
_SEMANTIC_NAMES = frozenset({"ValidationError", "ModelRetry"})
_MAX_CAUSES = 5


def classify(error: Failure) -> ToolFailure:
    """A `ToolFailure` saying whether `error` counts towards opening the breaker; never raises.

    A `ToolFailure` is returned as it is. Anything else becomes a new one whose message is
    "Type: text" and whose `__cause__` is `error`; a string or None is an unknown failure.
    """
    if isinstance(error, ToolFailure):
        return error
    if not isinstance(error, BaseException):
        return ToolFailure("unknown error" if error is None else str(error), retryable=True)
    verdict = _verdict(error)
    failure = ToolFailure(exception_text(error), retryable=verdict is not False)
    failure.__cause__ = error
    return failure


def exception_text(error: BaseException) -> str:
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _verdict(error: BaseException) -> bool | None:
    """True retryable, False semantic, None unknown (judged retryable by the caller)."""
    for _ in range(_MAX_CAUSES):
        if isinstance(error, ToolFailure):
            return error.retryable
        status = http_status(error)
        if status is not None:
            return status in RETRYABLE_STATUSES or status >= 500
        names = [cls.__name__ for cls in type(error).__mro__]
        if isinstance(error, (TimeoutError, ConnectionError)) or any(
            _TRANSPORT_NAME.search(name) for name in names
        ):
            return True
        if isinstance(error, (json.JSONDecodeError, UnicodeDecodeError)) or _DECODE_NAMES & set(
            names
        ):
            return True
        if isinstance(error, (ValueError, TypeError, LookupError)) or _SEMANTIC_NAMES & set(names):
            return False
        if error.__cause__ is None:
            return None
        error = error.__cause__
    return None


def http_status(error: BaseException) -> int | None:
    """The HTTP error status `error` carries (400-599), found by duck typing, else None.

    httpx `HTTPStatusError` and requests `HTTPError` (`.response.status_code`), aiohttp
    `ClientResponseError` (`.status`), the OpenAI and Anthropic clients' `APIStatusError`
    (`.status_code`), urllib's `HTTPError` (`.code`).
    """
    response = _attribute(error, "response")
    candidates = [
        _attribute(error, "status_code"),
        _attribute(error, "status"),
        _attribute(response, "status_code"),
        _attribute(response, "status"),
    ]
    if any("HTTP" in cls.__name__ for cls in type(error).__mro__):
        candidates.append(_attribute(error, "code"))  # `code` alone means too many things
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
            return value
    return None


def _attribute(owner: object, name: str) -> object:
    if owner is None:
        return None
    try:
        return getattr(owner, name, None)
    except Exception:  # noqa: BLE001 - a foreign exception's property may raise anything
        return None
