"""The gateway's result checks: the `checks` block of its config, and one `ResultChecker` whose
per-tool settings follow the upstreams' tools (each tool's declared `outputSchema` included).

    "checks": {
      "default": {"stale_after": 3},                  # every tool; false turns checks off
      "tools": {
        "flights": {"empty_is_healthy": true},        # "no flights that day" is an answer
        "web_search": {"no_results": ["No results found\\\\.?"],
                       "rules": [{"pattern": "served from cache", "reason": "serves a cached page"},
                                 {"pointer": "/meta/degraded", "equals": true}]}
      }
    }

A rule is a regular expression searched in the result's text, or a JSON pointer into its data
(structured content, else the text parsed as JSON) with `equals`, `empty` or `missing`; a result
that matches is `degraded` with the rule's `reason`. Every mistake is a ConfigError.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from breaker_panel.result_checks import (
    ResultChecker,
    ResultChecks,
    pointer_parts,
    readable,
    resolve_pointer,
)

__all__ = ["ChecksConfig", "ChecksError", "GatewayChecks", "Rule", "ToolChecks", "parse_checks"]

_FIELDS = {
    "enabled", "empty_is_healthy", "counts", "empty", "no_results", "empty_pointers",
    "error_body", "error_fields", "error_patterns", "schema", "stale_after", "rules",
}  # fmt: skip
_BOOLS = ("enabled", "empty_is_healthy", "counts", "empty", "error_body", "schema")
_LISTS = ("no_results", "empty_pointers", "error_fields", "error_patterns")
_MAX_RULES = 50


class ChecksError(ValueError):
    """A mistake in the `checks` block; the message names the field."""


@dataclass(frozen=True)
class Rule:
    """One user rule: `pattern` searched in the text, or `pointer` with a test on its value."""

    reason: str
    pattern: re.Pattern[str] | None = None
    pointer: str = ""
    test: str = ""  # "equals", "empty" or "missing"
    value: Any = None

    def fails(self, data: Any, text: str) -> bool:
        if self.pattern is not None:
            return self.pattern.search(text) is not None
        found, value = resolve_pointer(data, self.pointer)
        if self.test == "missing":
            return not found
        if self.test == "empty":
            return found and value in (None, "", [], {})
        return found and value == self.value and type(value) is type(self.value)


@dataclass(frozen=True)
class ToolChecks:
    """One tool's settings from the config: ResultChecks fields, `schema` and rules."""

    settings: Mapping[str, Any] = field(default_factory=dict)
    schema: bool = True
    rules: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class ChecksConfig:
    default: ToolChecks | None = field(default_factory=ToolChecks)  # None: off unless named
    tools: Mapping[str, ToolChecks] = field(default_factory=dict)

    def for_tool(self, name: str) -> ToolChecks | None:
        return self.tools.get(name, self.default)


def parse_checks(data: Any) -> ChecksConfig:
    """The `checks` block, validated (raises ChecksError naming the field)."""
    if data is None:
        return ChecksConfig()
    if not isinstance(data, dict):
        raise ChecksError("checks must be a JSON object")
    unknown = sorted(set(data) - {"default", "tools"})
    if unknown:
        raise ChecksError(f"checks: unknown field {unknown[0]!r} (allowed: default, tools)")
    raw_default = data.get("default", {})
    default = None if raw_default is False else _tool(raw_default, "checks.default")
    tools = data.get("tools", {})
    if not isinstance(tools, dict):
        raise ChecksError("checks.tools must map tool names to their checks")
    parsed = {
        name: _tool(spec, f"checks.tools.{name}")
        if spec is not False
        else _tool({"enabled": False}, "")
        for name, spec in tools.items()
    }
    return ChecksConfig(default=default, tools=parsed)


def _tool(spec: Any, where: str) -> ToolChecks:
    if not isinstance(spec, dict):
        raise ChecksError(f"{where} must be a JSON object (or false: no checks)")
    unknown = sorted(set(spec) - _FIELDS)
    if unknown:
        raise ChecksError(f"{where}: unknown field {unknown[0]!r} (allowed: {sorted(_FIELDS)})")
    for name in _BOOLS:
        if name in spec and not isinstance(spec[name], bool):
            raise ChecksError(f"{where}.{name} must be true or false")
    for name in _LISTS:
        if name in spec and (
            not isinstance(spec[name], list) or not all(isinstance(v, str) for v in spec[name])
        ):
            raise ChecksError(f"{where}.{name} must be a list of strings")
    stale = spec.get("stale_after", 3)
    if isinstance(stale, bool) or not isinstance(stale, int) or stale < 0 or stale == 1:
        raise ChecksError(f"{where}.stale_after must be 0 (off) or a whole number of at least 2")
    settings: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()}
    settings.pop("rules", None)
    schema = bool(settings.pop("schema", True))
    try:
        ResultChecks(**settings)  # the regular expressions and pointers, checked now
    except ValueError as exc:
        raise ChecksError(f"{where}: {exc}") from exc
    return ToolChecks(settings, schema, _rules(spec.get("rules", []), f"{where}.rules"))


def _rules(rules: Any, where: str) -> tuple[Rule, ...]:
    if not isinstance(rules, list) or len(rules) > _MAX_RULES:
        raise ChecksError(f"{where} must be a list of at most {_MAX_RULES} rules")
    return tuple(_rule(rule, f"{where}[{i}]") for i, rule in enumerate(rules))


def _rule(rule: Any, where: str) -> Rule:
    if not isinstance(rule, dict):
        raise ChecksError(f"{where} must be a JSON object")
    allowed = {"pattern", "pointer", "equals", "empty", "missing", "reason"}
    unknown = sorted(set(rule) - allowed)
    if unknown:
        raise ChecksError(f"{where}: unknown field {unknown[0]!r} (allowed: {sorted(allowed)})")
    reason = rule.get("reason", "")
    if not isinstance(reason, str) or len(reason) > 200:
        raise ChecksError(f"{where}.reason must be a string of at most 200 characters")
    if ("pattern" in rule) == ("pointer" in rule):
        raise ChecksError(f"{where}: give either pattern or pointer")
    if "pattern" in rule:
        pattern = rule["pattern"]
        if not isinstance(pattern, str) or not pattern:
            raise ChecksError(f"{where}.pattern must be a regular expression")
        try:
            compiled = re.compile(pattern, re.I)
        except re.error as exc:
            raise ChecksError(f"{where}.pattern: not a regular expression: {exc}") from exc
        return Rule(reason or f"its answer matches {pattern[:80]!r}", pattern=compiled)
    pointer = rule["pointer"]
    try:
        pointer_parts(pointer)
    except ValueError as exc:
        raise ChecksError(f"{where}.pointer: {exc}") from exc
    tests = [name for name in ("equals", "empty", "missing") if name in rule]
    if len(tests) != 1:
        raise ChecksError(f"{where}: a pointer rule takes exactly one of equals, empty, missing")
    test = tests[0]
    if test != "equals" and rule[test] is not True:
        raise ChecksError(f"{where}.{test} must be true")
    default_reason = {
        "equals": f"its answer has {pointer} = {rule.get('equals')!r:.60}",
        "empty": f"its answer has nothing at {pointer}",
        "missing": f"its answer lacks {pointer}",
    }[test]
    return Rule(reason or default_reason, pointer=pointer, test=test, value=rule.get("equals"))


class GatewayChecks:
    """One ResultChecker for every tool the gateway offers; `update()` follows the catalog."""

    def __init__(self, config: ChecksConfig) -> None:
        self.config = config
        self.checker = ResultChecker(default=None)

    def update(self, output_schemas: Mapping[str, Mapping[str, Any] | None]) -> None:
        """The tools offered now (exposed name -> its declared outputSchema, if any)."""
        tools: dict[str, ResultChecks] = {}
        for name, schema in output_schemas.items():
            spec = self.config.for_tool(name)
            if spec is None:
                continue
            settings = dict(spec.settings)
            if spec.schema and schema is not None:
                settings["output_schema"] = schema
            if spec.rules:
                settings["custom"] = _by_rules(spec.rules)
            tools[name] = ResultChecks(**settings)
        self.checker.tools = tools  # replaced whole: calls in flight read the old or the new


def _by_rules(rules: tuple[Rule, ...]) -> Any:
    def check(result: Any, arguments: Any) -> str | None:
        data, text = readable(result)  # ValueError: "could not check"
        for rule in rules:
            if rule.fails(data, text):
                return rule.reason
        return None

    return check
