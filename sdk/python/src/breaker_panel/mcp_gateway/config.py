"""The gateway's config file: which upstream MCP servers to front, and the breaker's settings.

A JSON object. `servers` (or `mcpServers`, so a Claude Desktop block can be pasted as is) maps
a name to `{"command", "args", "env", "cwd"}` (stdio) or `{"url", "headers"}` (streamable HTTP).
`way` (top level, or per server overriding it) is how an open tool is taken away from clients.
Every mistake is a `ConfigError` that names the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from breaker_panel.integrations.mcp import DEFAULT_RETRYABLE_PATTERNS, McpClassifier
from breaker_panel.mcp_gateway.checks import ChecksConfig, ChecksError, parse_checks
from breaker_panel.ways import Way, integration_way

__all__ = ["PREFIX_MODES", "BreakerSettings", "ConfigError", "GatewayConfig", "UpstreamConfig"]

PREFIX_MODES = ("collisions", "always", "never")
# Tool names that every client accepts (OpenAI's function names are the strictest).
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ConfigError(ValueError):
    """The config file is not usable; the message names the field."""


@dataclass(frozen=True)
class UpstreamConfig:
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    # Tool name (as this upstream names it) -> the arguments of the call the gateway makes as
    # its half-open trial when no client calls it (probe.py).
    probes: dict[str, dict[str, Any]] = field(default_factory=dict)
    # How this upstream's open tools are taken away (None: the config's `way`).
    way: Way | None = None

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"


@dataclass(frozen=True)
class BreakerSettings:
    threshold: int = 5
    cooldown: float = 30.0
    max_cooldown: float = 300.0
    retryable_patterns: tuple[str, ...] = DEFAULT_RETRYABLE_PATTERNS
    # How often the offered set is re-checked for changes no call or fleet sync reveals
    # (a cooldown that has elapsed).
    check_interval: float = 1.0


@dataclass(frozen=True)
class GatewayConfig:
    servers: tuple[UpstreamConfig, ...]
    prefix: str = "collisions"
    separator: str = "__"
    call_timeout: float = 60.0
    connect_timeout: float = 30.0
    # Every health_interval seconds each connected upstream is asked tools/list (an MCP request,
    # never a bare GET): no answer within health_timeout means reconnect.
    health_interval: float = 30.0
    health_timeout: float = 10.0
    # A result above this many bytes of content is answered with an error instead: no model
    # can read it, and a client may choke on it.
    max_result_bytes: int = 4 * 1024 * 1024
    agent: str = "mcp-gateway"
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    # A client session without a call for this long is over: its run finishes.
    session_idle_timeout: float = 1800.0
    # The most a tools/list result tells a client to cache it for (ttlMs).
    list_ttl: float = 300.0
    # The environment variable holding the control-plane token ("": BREAKER_PANEL_TOKEN).
    token_env: str = ""
    # A half-open tool with a probe that no client calls for this long gets the probe as its
    # trial.
    probe_after: float = 10.0
    # Result checks on every call (the `checks` block, mcp_gateway/checks.py): on by default.
    checks: ChecksConfig = field(default_factory=ChecksConfig)
    # How an open tool is taken away from clients: `remove` (it leaves tools/list, clients hear
    # list_changed) or `refuse` (it stays listed, byte-identical; its calls get the notice).
    # `restrict` is accepted and means `refuse`: MCP has no allowed-tools list.
    # docs/adr/0210-the-gateways-way-of-taking-a-tool-away.md
    way: Way = Way.REMOVE

    def way_of(self, upstream: UpstreamConfig) -> Way:
        """The way applied to `upstream`'s tools: `remove` or `refuse`."""
        return integration_way(upstream.way or self.way)

    def way_notes(self) -> list[str]:
        """What to say once at start about the ways asked for (`restrict` falls back)."""
        restricted = [s.name for s in self.servers if (s.way or self.way) is Way.RESTRICT]
        if not restricted:
            return []
        return [
            f"way restrict (servers: {', '.join(restricted)}) is served as refuse: MCP has no "
            "allowed-tools list, so an open tool stays in tools/list and its calls are "
            "answered with the notice"
        ]

    @classmethod
    def load(cls, path: str | Path) -> GatewayConfig:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read the config file {path}: {exc.strerror}") from exc
        except ValueError as exc:
            raise ConfigError(f"{path} is not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> GatewayConfig:
        data = _object(data, "the config")
        _only(data, {"servers", "mcpServers", "prefix", "separator", "call_timeout",
                     "connect_timeout", "agent", "breaker", "token_env",
                     "health_interval", "health_timeout", "max_result_bytes",
                     "session_idle_timeout", "list_ttl", "probe_after", "checks", "way"},
              "the config")  # fmt: skip
        raw = data.get("servers", data.get("mcpServers"))
        servers = _object(raw, "servers")
        if not servers:
            raise ConfigError("servers: name at least one upstream MCP server")
        prefix = data.get("prefix", "collisions")
        if prefix not in PREFIX_MODES:
            raise ConfigError(f"prefix must be one of {list(PREFIX_MODES)}, got {prefix!r}")
        separator = data.get("separator", "__")
        if not isinstance(separator, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,4}", separator):
            raise ConfigError("separator must be 1-4 characters among letters, digits, _ and -")
        agent = data.get("agent", "mcp-gateway")
        if not isinstance(agent, str) or not 0 < len(agent) <= 200:
            raise ConfigError("agent must be a string of 1-200 characters")
        token_env = data.get("token_env", "")
        if token_env != "" and not (
            isinstance(token_env, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", token_env)
        ):
            raise ConfigError("token_env must name an environment variable (letters, digits, _)")
        try:
            checks = parse_checks(data.get("checks"))
        except ChecksError as exc:
            raise ConfigError(str(exc)) from exc
        max_result = data.get("max_result_bytes", 4 * 1024 * 1024)
        if isinstance(max_result, bool) or not isinstance(max_result, int) or max_result < 1024:
            raise ConfigError("max_result_bytes must be a whole number of at least 1024")
        return cls(
            way=_way(data.get("way", Way.REMOVE.value), "way"),
            checks=checks,
            max_result_bytes=max_result,
            servers=tuple(_upstream(name, spec) for name, spec in servers.items()),
            token_env=token_env,
            prefix=prefix,
            separator=separator,
            call_timeout=_positive(data, "call_timeout", 60.0, "call_timeout"),
            connect_timeout=_positive(data, "connect_timeout", 30.0, "connect_timeout"),
            health_interval=_positive(data, "health_interval", 30.0, "health_interval"),
            health_timeout=_positive(data, "health_timeout", 10.0, "health_timeout"),
            agent=agent,
            breaker=_breaker(data.get("breaker", {})),
            session_idle_timeout=_positive(
                data, "session_idle_timeout", 1800.0, "session_idle_timeout"
            ),
            list_ttl=_positive(data, "list_ttl", 300.0, "list_ttl"),
            probe_after=_positive(data, "probe_after", 10.0, "probe_after"),
        )


def _upstream(name: str, spec: Any) -> UpstreamConfig:
    where = f"servers.{name}"
    if not _NAME.match(name):
        raise ConfigError(f"{where}: a server name is 1-64 letters, digits, _ or -")
    spec = _object(spec, where)
    _only(spec, {"command", "args", "env", "cwd", "url", "headers", "probes", "way"}, where)
    probes = _probes(spec.get("probes", {}), f"{where}.probes")
    way = _way(spec["way"], f"{where}.way") if "way" in spec else None
    if ("command" in spec) == ("url" in spec):
        raise ConfigError(f"{where}: give either command (stdio) or url (streamable HTTP)")
    if "url" in spec:
        url = spec["url"]
        if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url):
            raise ConfigError(f"{where}.url must be an http(s):// URL")
        return UpstreamConfig(
            name, url=url, headers=_strings(spec, "headers", where), probes=probes, way=way
        )
    command = spec["command"]
    if not isinstance(command, str) or not command:
        raise ConfigError(f"{where}.command must be a non-empty string")
    args = spec.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{where}.args must be a list of strings")
    cwd = spec.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ConfigError(f"{where}.cwd must be a string")
    return UpstreamConfig(
        name,
        command=command,
        args=tuple(args),
        env=_strings(spec, "env", where),
        cwd=cwd,
        probes=probes,
        way=way,
    )


def _probes(data: Any, where: str) -> dict[str, dict[str, Any]]:
    """`{"<tool>": {"arguments": {...}}}`: the call that is the tool's trial when nobody calls."""
    data = _object(data, where)
    probes: dict[str, dict[str, Any]] = {}
    for tool, spec in data.items():
        if not tool or len(tool) > 128:
            raise ConfigError(f"{where}: a tool name is 1-128 characters")
        spec = _object(spec, f"{where}.{tool}")
        _only(spec, {"arguments"}, f"{where}.{tool}")
        probes[tool] = _object(spec.get("arguments", {}), f"{where}.{tool}.arguments")
    return probes


def _breaker(data: Any) -> BreakerSettings:
    data = _object(data, "breaker")
    _only(data, {"threshold", "cooldown", "max_cooldown", "retryable_patterns",
                 "check_interval"}, "breaker")  # fmt: skip
    threshold = data.get("threshold", 5)
    if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1:
        raise ConfigError("breaker.threshold must be a whole number of at least 1")
    patterns = data.get("retryable_patterns", list(DEFAULT_RETRYABLE_PATTERNS))
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise ConfigError("breaker.retryable_patterns must be a list of regular expressions")
    try:
        McpClassifier(patterns)
    except ValueError as exc:
        raise ConfigError(f"breaker.{exc}") from exc
    cooldown = _positive(data, "cooldown", 30.0, "breaker.cooldown")
    max_cooldown = _positive(data, "max_cooldown", max(300.0, cooldown), "breaker.max_cooldown")
    if max_cooldown < cooldown:
        raise ConfigError("breaker.max_cooldown must be at least breaker.cooldown")
    return BreakerSettings(
        threshold=threshold,
        cooldown=cooldown,
        max_cooldown=max_cooldown,
        retryable_patterns=tuple(patterns),
        check_interval=_positive(data, "check_interval", 1.0, "breaker.check_interval"),
    )


def _way(value: Any, where: str) -> Way:
    choices = [w.value for w in Way]
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"{where} must be one of {choices}, got {value!r:.50}")
    return Way(value)


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a JSON object")
    return value


def _only(data: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r} (allowed: {sorted(allowed)})")


def _strings(spec: dict[str, Any], key: str, where: str) -> dict[str, str]:
    value = spec.get(key, {})
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(f"{where}.{key} must map strings to strings")
    return dict(value)


def _positive(data: dict[str, Any], key: str, default: float, where: str) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{where} must be a number of seconds above 0")
    return float(value)
