"""The gateway's config file and command line: every mistake is a clear error naming the field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from breaker_panel.mcp_gateway.__main__ import main, parse_args
from breaker_panel.mcp_gateway.config import ConfigError, GatewayConfig
from breaker_panel.vocabulary import Way

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
    ("bad way", {"servers": {"a": STDIO}, "way": "hide"}, "way must be one of"),
    ("way not a string", {"servers": {"a": STDIO}, "way": ["refuse"]}, "way must be one of"),
    ("bad server way", {"servers": {"a": {**STDIO, "way": None}}}, "servers.a.way must be one"),
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


def test_the_way_is_remove_unless_set_and_a_servers_way_overrides_the_configs() -> None:
    plain = GatewayConfig.from_dict({"servers": {"a": STDIO}})
    assert plain.way_of(plain.servers[0]) is Way.REMOVE and plain.way_notes() == []
    config = GatewayConfig.from_dict(
        {
            "way": "refuse",
            "servers": {
                "a": STDIO,
                "b": {**STDIO, "way": "remove"},
                "c": {"url": "https://c.example/mcp", "way": "restrict"},
            },
        }
    )
    assert [config.way_of(s) for s in config.servers] == [Way.REFUSE, Way.REMOVE, Way.REFUSE]
    assert config.servers[2].way is Way.RESTRICT  # asked for; served as refuse, and said so
    [note] = config.way_notes()
    assert "(servers: c) is served as refuse" in note


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
    assert "--token and --token-file need --control-plane" in capsys.readouterr().err


def test_token_env_must_name_a_variable() -> None:
    config = GatewayConfig.from_dict({"servers": {"a": STDIO}, "token_env": "PANEL_TOKEN"})
    assert config.token_env == "PANEL_TOKEN"
    for bad in ("", "1X", "A-B", 5):
        if bad == "":
            assert GatewayConfig.from_dict({"servers": {"a": STDIO}, "token_env": bad})
            continue
        with pytest.raises(ConfigError, match="token_env must name an environment variable"):
            GatewayConfig.from_dict({"servers": {"a": STDIO}, "token_env": bad})


COMMAND_LINES = [
    (["--http", "8000", "--host", "0.0.0.0"], "--auth-token-file .* or --insecure-no-auth"),
    (["--http", "8000", "--host", "10.1.2.3"], "serves every upstream's tools to the network"),
    (["--http", "8000", "--host", "mcp.internal"], "serves every upstream's tools to the network"),
    (["--auth-token-file", "x"], "go with --http"),
    (["--http", "8000", "--insecure-no-auth", "--auth-token-file", "x"], "not both"),
    (["--http", "8000", "--auth-token-file", "MISSING"], "--auth-token-file: cannot read"),
    (["--http", "8000", "--auth-token-file", "EMPTY"], "--auth-token-file: .* is empty"),
    (["--control-plane", "http://p", "--token-file", "MISSING"], "--token-file: cannot read"),
    (["--control-plane", "http://p", "--token-file", "EMPTY"], "--token-file: .* is empty"),
    (["--control-plane", "http://p", "--token-file", "SPACED"], "spaces or line breaks inside"),
    (["--token-file", "TOKEN"], "need --control-plane"),
    (["--control-plane", "http://p", "--token", "t", "--token-file", "TOKEN"], "not both"),
]


@pytest.mark.parametrize(
    ("argv", "message"), COMMAND_LINES, ids=[" ".join(a) for a, _ in COMMAND_LINES]
)
def test_command_line_mistakes_are_named(
    argv: list[str], message: str, tmp_path: Path, capsys: Any
) -> None:
    files = {"MISSING": tmp_path / "missing", "EMPTY": tmp_path / "empty", "TOKEN": tmp_path / "t"}
    files["SPACED"] = tmp_path / "spaced"
    files["EMPTY"].write_text("\n")
    files["TOKEN"].write_text("secret\n")
    files["SPACED"].write_text("two words\n")
    argv = [str(files[a]) if a in files else a for a in argv]
    with pytest.raises(SystemExit):
        parse_args(["--config", str(tmp_path / "x.json"), *argv])
    assert re.search(message, capsys.readouterr().err), message


def test_loopback_needs_no_auth_and_a_non_loopback_host_takes_an_explicit_choice(
    tmp_path: Path,
) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    base = ["--config", "x.json", "--http", "8000"]
    assert parse_args([*base, "--host", "127.0.0.1"]).auth_token == ""
    assert parse_args([*base, "--host", "::1"]).auth_token == ""
    assert parse_args([*base, "--host", "0.0.0.0", "--insecure-no-auth"]).insecure_no_auth
    args = parse_args([*base, "--host", "0.0.0.0", "--auth-token-file", str(token)])
    assert args.auth_token == "s3cret"


def test_the_readme_config_and_client_configs_load() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## MCP: a breaker gateway") :]
    blocks = re.findall(r"```json\n(.*?)```", section, re.S)
    config = GatewayConfig.from_dict(json.loads(blocks[0]))
    assert config.token_env == "BREAKER_PANEL_TOKEN" and config.max_result_bytes == 4194304
    # Every client config passes the token: in env, or by --token-file.
    clients = [json.loads(block) for block in blocks[1:]]
    assert len(clients) >= 2
    for client in clients:
        entry = client["mcpServers"]["tools"]
        assert "BREAKER_PANEL_TOKEN" in entry.get("env", {}) or "--token-file" in entry["args"]
    python_blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    for needle in ('"env": {"BREAKER_PANEL_TOKEN"', '"--token-file"'):
        assert any(needle in block for block in python_blocks), needle
