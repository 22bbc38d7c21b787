"""The gateway's config file and command line: every mistake is a clear error naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from breaker_panel.mcp_gateway.__main__ import main
from breaker_panel.mcp_gateway.config import ConfigError, GatewayConfig

STDIO = {"command": "python", "args": ["-m", "server"]}

BAD = [
    ("not an object", [], "the config must be a JSON object"),
    ("no servers", {}, "servers must be a JSON object"),
    ("empty servers", {"servers": {}}, "servers: name at least one"),
    ("unknown field", {"servers": {"a": STDIO}, "prefx": "always"}, "unknown field 'prefx'"),
    ("both command and url", {"servers": {"a": {**STDIO, "url": "http://x"}}}, "servers.a:"),
    ("bad url", {"servers": {"a": {"url": "ftp://x"}}}, "servers.a.url"),
    ("args not a list", {"servers": {"a": {"command": "x", "args": "y"}}}, "servers.a.args"),
    ("env not strings", {"servers": {"a": {"command": "x", "env": {"K": 1}}}}, "servers.a.env"),
    ("bad server name", {"servers": {"a b": STDIO}}, "servers.a b"),
    ("bad prefix", {"servers": {"a": STDIO}, "prefix": "sometimes"}, "prefix must be one of"),
    ("bad timeout", {"servers": {"a": STDIO}, "call_timeout": 0}, "call_timeout"),
    ("bad threshold", {"servers": {"a": STDIO}, "breaker": {"threshold": 0}}, "breaker.threshold"),
    (
        "bad pattern",
        {"servers": {"a": STDIO}, "breaker": {"retryable_patterns": ["("]}},
        "breaker.retryable_patterns",
    ),
    (
        "max below cooldown",
        {"servers": {"a": STDIO}, "breaker": {"cooldown": 60, "max_cooldown": 10}},
        "breaker.max_cooldown",
    ),
]


@pytest.mark.parametrize(("case", "data", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_configs_name_the_field(case: str, data: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        GatewayConfig.from_dict(data)


def test_a_claude_desktop_block_is_accepted_as_is() -> None:
    config = GatewayConfig.from_dict(
        {"mcpServers": {"search": STDIO, "docs": {"url": "https://docs.example/mcp"}}}
    )
    assert [(s.name, s.transport) for s in config.servers] == [
        ("search", "stdio"),
        ("docs", "http"),
    ]
    assert config.breaker.threshold == 5 and config.prefix == "collisions"


def test_the_command_line_reports_a_bad_config_and_exits(tmp_path: Path) -> None:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps({"servers": {"a": {"url": "nope"}}}))
    with pytest.raises(SystemExit, match=r"breaker-panel-mcp: error: servers\.a\.url"):
        main(["--config", str(path)])
    with pytest.raises(SystemExit, match="cannot read the config file"):
        main(["--config", str(tmp_path / "missing.json")])


def test_a_token_without_a_control_plane_is_refused(tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(SystemExit):
        main(["--config", str(tmp_path / "x.json"), "--token", "t"])
    assert "--token needs --control-plane" in capsys.readouterr().err
