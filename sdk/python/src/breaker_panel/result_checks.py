"""Result checks: is a call that returned really an answer? Cheap (no model call), per tool.

    checker = ResultChecker({"web_search": ResultChecks(), "flights": ResultChecks(
        empty_is_healthy=True)})                       # "no flights that day" is an answer
    verdict = checker.check("web_search", result, arguments={"q": "..."})
    verdict.failure()                                  # None, or a DegradedResult to record

Built in, each one switchable: `empty` (an empty string, list or object, an MCP result with no
content, or a configured "no results" shape), `error_body` (an `error`/`status` field or
rate-limit, quota or unavailable wording in a successful answer), `schema` (MCP
`structuredContent` that breaks the tool's `outputSchema`; needs the optional `jsonschema`),
`stale` (the same long answer to different arguments N calls running), and `custom` (a callable).
A result the checks cannot read (too big, too deep, invalid UTF-8, an invalid schema, a custom
check that raises) is `unchecked`: it counts as neither, is logged once, and is never changed.
Why these rules: docs/adr/0207-result-checks-are-verdicts-on-a-returned-call.md.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from breaker_panel.classify import DegradedResult

__all__ = [
    "DEFAULT_ERROR_FIELDS",
    "DEFAULT_ERROR_PATTERNS",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_RESULT_CHARS",
    "CheckStatus",
    "CustomCheck",
    "ResultChecker",
    "ResultChecks",
    "Verdict",
    "pointer_parts",
    "readable",
    "resolve_pointer",
]

logger = logging.getLogger("breaker_panel.result_checks")

# Bounds past which a result is not read at all ("could not check"): a check must stay cheap
# on the agent's hot path, and a 10 MB or 10,000-deep answer is not one to judge by its shape.
MAX_RESULT_CHARS = 1_000_000
MAX_DEPTH = 64
MAX_NODES = 50_000
# Wording of a failure inside a successful answer. Matched only where an error would be said:
# at the start of a short text answer or of a message field (after an "Error:" or "503" lead),
# never inside a long page of results or mid-sentence ("Top result for service unavailable...").
DEFAULT_ERROR_PATTERNS: tuple[str, ...] = (
    r"\brate[ -]?limit(ed|s)?\b",
    r"\btoo many requests\b",
    r"\bquota\b.{0,40}\b(exceeded|exhausted|reached)\b",
    r"\bexceeded\b.{0,30}\bquota\b",
    r"\b(service|server|api|upstream|backend)\b.{0,30}\bunavailable\b",
    r"\btemporarily unavailable\b",
    r"\binternal (server )?error\b",
    r"\btry again later\b",
)
# Top-level fields that carry an error when they are set (`{"error": "..."}`).
DEFAULT_ERROR_FIELDS: tuple[str, ...] = ("error", "errors", "error_message", "errorMessage")
_FAILED_STATUSES = frozenset({"error", "failed", "failure", "fail", "unavailable", "fault"})
_MESSAGE_FIELDS = ("message", "detail", "status", "statusText", "msg")
_SHORT_TEXT = 300  # a text answer this short may be an error message as a whole
# What may come before the error's own words: "Error: ", "HTTP 503 ", "Sorry, ", "You have "...
_ERROR_LEAD = re.compile(
    r"\W*(?:(?:error|warning|fatal|failed|http(?:/\d(?:\.\d)?)?\s*\d{3}|\d{3})\b[\s:.\-\u2013\u2014]*)?"
    r"(?:(?:sorry|oops)\W*)?(?:(?:you(?:'ve| have)?|the|this|your|request)\s+)?",
    re.I,
)
_STALE_MIN_CHARS = 32  # "4" or "true" may rightly answer different questions

CustomCheck = Callable[[Any, Mapping[str, Any] | None], str | None]
"""A user's check: (result, arguments) -> None when the result is fine, else the reason it is
not, in words for a model ("returns yesterday's prices"). Raising means "could not check"."""


class CheckStatus(StrEnum):
    PASSED = "passed"
    DEGRADED = "degraded"
    UNCHECKED = "unchecked"  # could not check: counted as neither, the result is untouched


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the checks said of one result; `check` names the one that failed or could not run."""

    status: CheckStatus
    check: str = ""
    reason: str = ""
    counts: bool = True

    def failure(self) -> DegradedResult | None:
        """The failure to record for a degraded result, else None (passed or unchecked)."""
        if self.status is not CheckStatus.DEGRADED:
            return None
        return DegradedResult(self.reason, check=self.check, counts=self.counts)


PASSED = Verdict(CheckStatus.PASSED)


@dataclass(frozen=True, slots=True)
class ResultChecks:
    """One tool's checks. `empty_is_healthy=True` (the tool may rightly answer with nothing)
    turns every check off unless `enabled=True` says otherwise, and the empty check for good.

    `counts=False`: a degraded result is reported (as semantic) but never counts towards
    opening the breaker. `no_results`: regular expressions a whole text answer may match to
    mean "nothing found" ("No results found."); `empty_pointers`: JSON pointers ("/results")
    whose value being empty makes the answer empty. `stale_after`: how many calls running
    with different arguments may return the same answer (0: off).
    """

    enabled: bool | None = None
    empty_is_healthy: bool = False
    counts: bool = True
    empty: bool = True
    no_results: Sequence[str] = ()
    empty_pointers: Sequence[str] = ()
    error_body: bool = True
    error_fields: Sequence[str] = DEFAULT_ERROR_FIELDS
    error_patterns: Sequence[str] = DEFAULT_ERROR_PATTERNS
    output_schema: Mapping[str, Any] | None = None
    stale_after: int = 3
    custom: CustomCheck | None = None
    _compiled: _Compiled = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.stale_after < 0 or self.stale_after == 1:
            raise ValueError("stale_after is 0 (off) or at least 2 calls")
        for pointer in self.empty_pointers:
            _pointer_parts(pointer)  # raises ValueError on a malformed pointer
        object.__setattr__(self, "_compiled", _Compiled(self))

    @property
    def active(self) -> bool:
        return self.enabled if self.enabled is not None else not self.empty_is_healthy


class _Compiled:
    """Regular expressions compiled and the schema validator built once per tool."""

    __slots__ = ("error_pattern", "lock", "no_results", "schema_error", "validator")

    def __init__(self, checks: ResultChecks) -> None:
        self.error_pattern = _compile("error_patterns", checks.error_patterns, re.I)
        self.no_results = _compile("no_results", checks.no_results, re.I)
        self.validator: Any = None
        self.schema_error = ""
        self.lock = threading.Lock()
        if checks.output_schema is not None:
            self.validator, self.schema_error = _validator(checks.output_schema)


def _compile(name: str, patterns: Sequence[str], flags: int) -> re.Pattern[str] | None:
    if isinstance(patterns, str):
        raise ValueError(f"{name} must be a list of regular expressions, not one string")
    if not patterns:
        return None
    try:
        return re.compile("|".join(f"(?:{p})" for p in patterns), flags)
    except re.error as exc:
        raise ValueError(f"{name}: not a regular expression: {exc}") from exc


def _validator(schema: Mapping[str, Any]) -> tuple[Any, str]:
    """(validator, "") or (None, why the schema cannot be checked against)."""
    try:
        import jsonschema
    except ImportError:
        return None, "jsonschema is not installed (pip install 'breaker-panel-sdk[checks]')"
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        return cls(schema), ""
    except jsonschema.exceptions.SchemaError as exc:
        return None, f"the output schema is itself invalid: {exc.message[:200]}"
    except (TypeError, ValueError, RecursionError) as exc:
        return None, f"the output schema is unusable: {type(exc).__name__}"


class _Unreadable(Exception):
    """The result cannot be read within the checks' bounds."""


@dataclass(slots=True)
class _Seen:
    result: int
    arguments: str
    running: int


class ResultChecker:
    """The checks of every tool, and the little state the stale check keeps per tool.

    `tools` maps a tool name to its `ResultChecks`; any other tool gets `default`
    (`ResultChecks()`, every built-in check on) or, with `default=None`, no checks at all.
    Thread-safe; `check()` never raises for a result, whatever it is.
    """

    def __init__(
        self,
        tools: Mapping[str, ResultChecks] | None = None,
        *,
        default: ResultChecks | None = ResultChecks(),
    ) -> None:
        self.tools = dict(tools or {})
        self.default = default
        self._seen: dict[str, _Seen] = {}
        self._lock = threading.Lock()
        self._logged: set[tuple[str, str]] = set()

    def checks_for(self, tool: str) -> ResultChecks | None:
        checks = self.tools.get(tool, self.default)
        return checks if checks is not None and checks.active else None

    def check(self, tool: str, result: Any, arguments: Mapping[str, Any] | None = None) -> Verdict:
        """The verdict on one returned call of `tool`; `result` is only read."""
        checks = self.checks_for(tool)
        if checks is None:
            return PASSED
        try:
            return self._check(tool, checks, result, arguments)
        except (_Unreadable, RecursionError, MemoryError, UnicodeError) as exc:
            return self._unchecked(tool, "read", _why(exc))
        except Exception as exc:  # noqa: BLE001 - a result's own code (model_dump, a Mapping)
            # may raise anything; a check must never break the agent loop. Logged once.
            return self._unchecked(tool, "read", f"reading the result raised {_why(exc)}")

    def _check(
        self, tool: str, checks: ResultChecks, result: Any, arguments: Mapping[str, Any] | None
    ) -> Verdict:
        shape = _Shape.of(result)
        compiled = checks._compiled
        if checks.empty and not checks.empty_is_healthy:
            reason = _empty(shape, checks)
            if reason:
                return self._degraded(tool, checks, "empty", reason)
        if checks.error_body:
            reason = _error_body(shape, checks)
            if reason:
                return self._degraded(tool, checks, "error_body", reason)
        if checks.output_schema is not None and (shape.structured is not None or shape.mcp):
            if compiled.validator is None:
                return self._unchecked(tool, "schema", compiled.schema_error)
            if shape.structured is None:  # what the mcp client rejects too
                reason = "returns no structured content although it declares an output schema"
                return self._degraded(tool, checks, "schema", reason)
            verdict = self._schema(tool, checks, shape.structured)
            if verdict is not None:
                return verdict
        if checks.custom is not None:
            verdict = self._custom(tool, checks, result, arguments)
            if verdict is not None:
                return verdict
        if self._stale(tool, checks, shape, arguments):
            reason = "returns the same answer to different questions"
            return self._degraded(tool, checks, "stale", reason)
        return PASSED

    def _schema(self, tool: str, checks: ResultChecks, structured: Any) -> Verdict | None:
        with checks._compiled.lock:  # jsonschema validators are not documented thread-safe
            error = _first_schema_error(checks._compiled.validator, structured)
        if error is None:
            return None
        reason = f"returns structured content that breaks its output schema ({error})"
        return self._degraded(tool, checks, "schema", reason)

    def _custom(
        self, tool: str, checks: ResultChecks, result: Any, arguments: Mapping[str, Any] | None
    ) -> Verdict | None:
        assert checks.custom is not None
        try:
            reason = checks.custom(result, arguments)
        except Exception as exc:  # noqa: BLE001 - a user's check must not break the agent
            return self._unchecked(tool, "custom", f"the custom check raised {_why(exc)}")
        if reason is None or reason == "":
            return None
        return self._degraded(tool, checks, "custom", str(reason)[:300])

    def _stale(
        self, tool: str, checks: ResultChecks, shape: _Shape, arguments: Mapping[str, Any] | None
    ) -> bool:
        if not checks.stale_after or arguments is None or len(shape.text) < _STALE_MIN_CHARS:
            return False
        try:
            said = json.dumps(arguments, sort_keys=True, default=repr)
        except (TypeError, ValueError):
            return False
        answer = hash(shape.text)
        with self._lock:
            seen = self._seen.get(tool)
            if seen is None or seen.result != answer:
                self._seen[tool] = _Seen(answer, said, 1)
                return False
            if seen.arguments == said:
                return False  # the same question may get the same answer
            seen.arguments, seen.running = said, seen.running + 1
            return seen.running >= checks.stale_after

    def _degraded(self, tool: str, checks: ResultChecks, check: str, reason: str) -> Verdict:
        if check != "stale":
            with self._lock:
                self._seen.pop(tool, None)
        return Verdict(CheckStatus.DEGRADED, check, reason, checks.counts)

    def _unchecked(self, tool: str, check: str, reason: str) -> Verdict:
        key = (tool, check)
        if key not in self._logged:  # once per tool and check: a big result comes back often
            self._logged.add(key)
            logger.warning("could not check a result of %s (%s): %s", tool, check, reason)
        return Verdict(CheckStatus.UNCHECKED, check, f"could not check: {reason}")


def _why(exc: BaseException) -> str:
    text = str(exc)[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- reading a result ----------------------------------------------------------------------


class _Shape:
    """A result as the checks read it: its data (parsed JSON where the answer is JSON text),
    its text, and an MCP result's structured content."""

    __slots__ = ("_joined", "data", "mcp", "mcp_empty", "structured")

    def __init__(
        self, data: Any, text: str | None, structured: Any, mcp_empty: bool, mcp: bool = False
    ) -> None:
        self.data, self._joined, self.structured, self.mcp_empty = data, text, structured, mcp_empty
        self.mcp = mcp  # an MCP CallToolResult (content, structuredContent, isError)

    @property
    def text(self) -> str:
        """The answer as text; for data, its JSON, made only when a check needs it (costly)."""
        if self._joined is None:
            self._joined = _text_of(self.data)
        return self._joined

    @classmethod
    def of(cls, result: Any) -> _Shape:
        if isinstance(result, (bytes, bytearray, memoryview)):
            raw = bytes(result)
            if len(raw) > MAX_RESULT_CHARS:
                raise _Unreadable(f"a result of {len(raw):,} bytes is over the checks' bound")
            result = raw.decode("utf-8")  # UnicodeDecodeError: could not check
        if hasattr(result, "model_dump") and callable(result.model_dump):
            result = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(result, str):
            return cls._text(result)
        _bounded(result)
        if _is_mcp(result):
            return cls._mcp(result)
        return cls(result, None, None, False)

    @classmethod
    def _text(cls, text: str) -> _Shape:
        if len(text) > MAX_RESULT_CHARS:
            raise _Unreadable(f"a result of {len(text):,} characters is over the checks' bound")
        text.encode("utf-8")  # lone surrogates: could not check
        stripped = text.strip()
        data: Any = text
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            try:
                data = json.loads(stripped)
            except ValueError:
                data = text
            else:
                _bounded(data)
        return cls(data, stripped, None, False)

    @classmethod
    def _mcp(cls, result: Mapping[str, Any]) -> _Shape:
        content = result.get("content") or []
        structured = result.get("structuredContent")
        texts = [
            item.get("text", "")
            for item in content
            if isinstance(item, Mapping) and item.get("type") == "text"
        ]
        others = [
            item
            for item in content
            if not (isinstance(item, Mapping) and item.get("type") == "text")
        ]
        text = "\n".join(t for t in texts if isinstance(t, str)).strip()
        if structured is not None:
            data: Any = structured
        elif len(texts) == 1 and not others:
            data = cls._text(text).data
        else:
            data = text if not others else content
        empty = not others and not text and structured is None
        return cls(data, text or None, structured, empty, mcp=True)


def readable(result: Any) -> tuple[Any, str]:
    """(data, text) of a result as the checks read it: parsed JSON where the answer is JSON
    text, an MCP result's structured content. Raises ValueError when it cannot be read."""
    try:
        shape = _Shape.of(result)
    except (_Unreadable, RecursionError, UnicodeError) as exc:
        raise ValueError(_why(exc)) from exc
    return shape.data, shape.text


def _is_mcp(result: Any) -> bool:
    return (
        isinstance(result, Mapping)
        and isinstance(result.get("content"), list)
        and set(result) <= {"content", "structuredContent", "isError", "_meta", "meta"}
    )


_SCALARS = (int, float, bool, type(None))


def _bounded(data: Any) -> None:
    """Raise _Unreadable past MAX_DEPTH levels or MAX_NODES values; iterative, so no recursion.
    Only containers go on the stack: a leaf costs one type test (this runs on every result)."""
    if not _is_container(data):
        _leaf(data)
        return
    stack: list[tuple[Any, int]] = [(data, 0)]
    nodes = 1
    while stack:
        value, depth = stack.pop()
        if depth >= MAX_DEPTH:
            raise _Unreadable(f"a result nested more than {MAX_DEPTH} levels deep")
        children = value.values() if isinstance(value, Mapping) else value
        nodes += len(children)
        if nodes > MAX_NODES:
            raise _Unreadable(f"a result of more than {MAX_NODES:,} values")
        for child in children:
            kind = type(child)
            if kind is str:
                if len(child) > MAX_RESULT_CHARS:
                    raise _Unreadable("a string value over the checks' bound")
            elif kind not in _SCALARS and _is_container(child):
                stack.append((child, depth + 1))


def _is_container(value: Any) -> bool:
    kind = type(value)
    return kind is dict or kind is list or kind is tuple or isinstance(value, Mapping)


def _leaf(value: Any) -> None:
    if isinstance(value, str) and len(value) > MAX_RESULT_CHARS:
        raise _Unreadable("a string value over the checks' bound")


def _text_of(data: Any) -> str:
    try:
        return json.dumps(data, sort_keys=True, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(data)[:MAX_RESULT_CHARS]


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (Mapping, list, tuple)):
        return len(value) == 0
    return False


def _says_nothing(data: Mapping[str, Any]) -> bool:
    """Every field empty or a zero count, and at least one an empty list or object: an empty
    page of results. `{"temperature": 0}` or `{"in_stock": false}` is an answer."""
    collections = 0
    for value in data.values():
        if isinstance(value, (Mapping, list, tuple)) and not value:
            collections += 1
        elif not (value is None or (isinstance(value, str) and not value.strip())) and not (
            type(value) is int and value == 0
        ):
            return False
    return collections > 0


# -- the built-in checks -------------------------------------------------------------------

EMPTY_REASON = "returns empty results for every query"


def _empty(shape: _Shape, checks: ResultChecks) -> str:
    data = shape.data
    if shape.mcp_empty or _is_empty(data):
        return EMPTY_REASON
    if isinstance(data, Mapping) and _says_nothing(data):
        return EMPTY_REASON  # {"results": [], "total": 0}: every field says "nothing"
    for pointer in checks.empty_pointers:
        found, value = _resolve(data, pointer)
        if found and _is_empty(value):
            return EMPTY_REASON
    pattern = checks._compiled.no_results
    if (
        pattern is not None
        and isinstance(data, str)
        and len(shape.text) <= _SHORT_TEXT
        and pattern.fullmatch(shape.text)
    ):
        return EMPTY_REASON
    return ""


def _error_body(shape: _Shape, checks: ResultChecks) -> str:
    data, pattern = shape.data, checks._compiled.error_pattern
    if isinstance(data, Mapping):
        for name in checks.error_fields:
            value = data.get(name)
            if value is not None and value is not False and not _is_empty(value):
                return _error_reason(value)
        status = data.get("status")
        if isinstance(status, str) and status.strip().lower() in _FAILED_STATUSES:
            return _error_reason(data.get("message") or status)
        if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
            return _error_reason(data.get("message") or f"status {status}")
        if pattern is not None and len(data) <= 3:
            for name in _MESSAGE_FIELDS:
                value = data.get(name)
                if isinstance(value, str) and _says_error(pattern, value):
                    return _error_reason(value)
    elif (
        isinstance(data, str)
        and pattern is not None
        and len(shape.text) <= _SHORT_TEXT
        and _says_error(pattern, shape.text)
    ):
        return _error_reason(shape.text)
    return ""


def _says_error(pattern: re.Pattern[str], text: str) -> bool:
    """Does `text` open with error wording (after an optional "Error:"-like lead)?"""
    lead = _ERROR_LEAD.match(text)
    return pattern.match(text, lead.end() if lead else 0) is not None


def _error_reason(value: Any) -> str:
    if isinstance(value, Mapping):
        value = value.get("message") or value.get("detail") or value.get("code") or value
    if isinstance(value, list) and value:
        value = value[0]
    text = value if isinstance(value, str) else _text_of(value)
    text = " ".join(text.split())[:160]
    return f"answers with an error instead of results ({text})"


def _first_schema_error(validator: Any, instance: Any) -> str | None:
    error = next(iter(validator.iter_errors(instance)), None)
    if error is None:
        return None
    where = "/" + "/".join(str(part) for part in error.absolute_path)
    return f"at {where}: {error.message[:160]}"


def _pointer_parts(pointer: str) -> list[str]:
    """RFC 6901: "" is the whole document, else "/a/b" with ~1 for "/" and ~0 for "~"."""
    if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
        raise ValueError(f"a JSON pointer is empty or starts with '/', got {pointer!r}")
    if not pointer:
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def resolve_pointer(data: Any, pointer: str) -> tuple[bool, Any]:
    """(True, value) where the JSON pointer `pointer` leads in `data`, else (False, None)."""
    return _resolve(data, pointer)


def pointer_parts(pointer: str) -> list[str]:
    """The reference tokens of a JSON pointer; ValueError when it is malformed."""
    return _pointer_parts(pointer)


def _resolve(data: Any, pointer: str) -> tuple[bool, Any]:
    """(True, value) where `pointer` leads in `data`, else (False, None)."""
    value = data
    for part in _pointer_parts(pointer):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value
