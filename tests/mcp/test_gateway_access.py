"""Who may reach the gateway, and how its control-plane token arrives: a bearer token on HTTP
off loopback, `--token-file` / `token_env`, and a missing token said out loud (not a crash)."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from scripts.testing.mcp_servers import (
    PYTHON,
    Flaky,
    Notes,
    Process,
    connect,
    start_gateway_http,
    tool_names,
    write_config,
)
from scripts.testing.processes import ROOT


def _post(url: str, headers: dict[str, str]) -> int:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_http_off_loopback_needs_the_bearer_token(
    flaky: Flaky, tmp_path: Path, processes: list[Process]
) -> None:
    token = tmp_path / "auth-token"
    token.write_text("s3cret-token\n")
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})
    gateway = start_gateway_http(
        config, processes, tmp_path, "--host", "0.0.0.0", "--auth-token-file", str(token)
    )
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    assert _post(gateway.url, headers) == 401
    assert _post(gateway.url, headers | {"Authorization": "Bearer wrong"}) == 401
    assert _post(gateway.url, headers | {"Authorization": "s3cret-token"}) == 401

    async def scenario() -> None:
        http = create_mcp_http_client(headers={"Authorization": "Bearer s3cret-token"})
        transport = streamable_http_client(gateway.url, http_client=http)
        async with Client(transport, mode="legacy", cache=None) as client:
            assert "echo" in await tool_names(client)
            assert not (await client.call_tool("echo", {"text": "hi"})).is_error

    anyio.run(scenario)
    assert "clients must send the bearer token" in gateway.log.read_text()


def test_insecure_no_auth_serves_and_says_so(
    flaky: Flaky, tmp_path: Path, processes: list[Process]
) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})
    gateway = start_gateway_http(
        config, processes, tmp_path, "--host", "0.0.0.0", "--insecure-no-auth"
    )
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    assert _post(gateway.url, headers) != 401
    log = gateway.log.read_text()
    assert "WITHOUT authentication (--insecure-no-auth)" in log


def test_a_missing_token_is_said_and_the_upstreams_are_still_served(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})
    stderr = tmp_path / "gateway.err"
    # As an MCP client starts it: StdioServerParameters passes only a default environment, so
    # even a BREAKER_PANEL_TOKEN set in the client's own environment would not arrive.
    args = ["-m", "breaker_panel.mcp_gateway", "--config", str(config)]
    args += ["--control-plane", "http://127.0.0.1:9"]
    server = StdioServerParameters(
        command="/bin/sh",
        args=["-c", f'exec "$0" "$@" 2>>{stderr}', PYTHON, *args],
        cwd=str(ROOT),
    )

    async def scenario() -> None:
        async with connect(server, Notes()) as client:
            assert "echo" in await tool_names(client)
            result = await client.call_tool("echo", {"text": "still here"})
            assert not result.is_error

    anyio.run(scenario)
    said = stderr.read_text()
    assert "no agent token" in said and "$BREAKER_PANEL_TOKEN unset" in said
    assert "Serving the upstreams WITHOUT the fleet" in said
