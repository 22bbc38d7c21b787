"""Bad input reaches the gateway: each gets a clear error to the client and a line in the log,
and the gateway keeps serving the other upstreams."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from scripts.testing.mcp_servers import (
    PYTHON,
    Flaky,
    Notes,
    connect,
    gateway_stdio,
    tool_names,
    write_config,
)
from scripts.testing.processes import ROOT


def text_of(result: Any) -> str:
    return " ".join(block.text for block in result.content)


def test_a_missing_command_is_logged_and_the_others_are_served(
    flaky: Flaky, tmp_path: Path
) -> None:
    ghost = {"command": str(tmp_path / "no-such-server"), "args": []}
    config = write_config(tmp_path / "gateway.json", {"ghost": ghost, "search": flaky.stdio()})
    log = tmp_path / "gateway.err"

    async def scenario() -> None:
        async with connect(gateway_stdio(config, stderr=log), Notes()) as client:
            assert await tool_names(client) == ["web_search", "fetch_page", "echo"]
            assert text_of(await client.call_tool("echo", {"text": "hi"})) == "flaky:hi"
            # A call of one of its tools (the client cannot know their names: it guesses, or
            # was configured for the server before the gateway) says which upstream is down
            # and why.
            with pytest.raises(MCPError) as prefixed:
                await client.call_tool("ghost__lookup", {"q": "x"})
            assert prefixed.value.code == -32602
            assert str(prefixed.value) == (
                "unknown tool: 'ghost__lookup': upstream ghost is not running (cannot start "
                f"it: No such file or directory: '{tmp_path / 'no-such-server'}')"
            )
            with pytest.raises(MCPError, match=r"unknown tool: 'lookup'; upstreams not running"
                               r", whose tools are not served: ghost \(cannot start it: No "
                               r"such file or directory: '.*no-such-server'\)"):  # fmt: skip
                await client.call_tool("lookup", {"q": "x"})
            assert text_of(await client.call_tool("echo", {"text": "again"})) == "flaky:again"

    anyio.run(scenario)
    said = log.read_text()
    assert "upstream ghost: cannot start it: No such file or directory" in said
    assert "no-such-server" in said


def test_an_upstream_dying_mid_call_leaves_the_others_serving(tmp_path: Path) -> None:
    one, two = Flaky(tmp_path / "one.json", "one"), Flaky(tmp_path / "two.json", "two")
    config = write_config(tmp_path / "gateway.json", {"one": one.stdio(), "two": two.stdio()})
    log = tmp_path / "gateway.err"

    async def scenario() -> None:
        async with connect(gateway_stdio(config, stderr=log), Notes()) as client:
            await tool_names(client)
            one.set(web_search="exit")
            died = await client.call_tool("one__web_search", {"text": "q"})
            assert died.is_error and "the upstream connection closed" in text_of(died)
            assert text_of(await client.call_tool("two__echo", {"text": "x"})) == "two:x"

    anyio.run(scenario)
    assert "upstream one:" in log.read_text()  # the reconnect, logged


def test_an_upstream_line_that_is_no_json_rpc_is_logged_and_skipped(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})
    log = tmp_path / "gateway.err"

    async def scenario() -> None:
        async with connect(gateway_stdio(config, stderr=log), Notes()) as client:
            await tool_names(client)
            flaky.set(web_search="garbage")
            for _ in range(3):  # the answer after the stray line is the call's
                assert text_of(await client.call_tool("web_search", {"text": "q"})) == "flaky:q"
            assert "web_search" in await tool_names(client)
            assert text_of(await client.call_tool("echo", {"text": "x"})) == "flaky:x"

    anyio.run(scenario)
    assert "an upstream sent a line that is no JSON-RPC" in log.read_text()


def test_a_10_mb_result_is_answered_with_a_clear_error(flaky: Flaky, tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})
    log = tmp_path / "gateway.err"

    async def scenario() -> None:
        async with connect(gateway_stdio(config, stderr=log), Notes()) as client:
            await tool_names(client)
            flaky.set(web_search="big")
            for _ in range(6):  # the tool works: asking too much says nothing of its health
                result = await client.call_tool("web_search", {"text": "q"})
                assert result.is_error
                assert "the result is 10.0 MB, over the gateway's limit" in text_of(result)
                assert len(text_of(result)) < 1000
            assert "web_search" in await tool_names(client)
            assert text_of(await client.call_tool("echo", {"text": "x"})) == "flaky:x"

    anyio.run(scenario)
    assert "max_result_bytes" in log.read_text()


def test_a_tool_name_with_control_characters_is_left_out(flaky: Flaky, tmp_path: Path) -> None:
    flaky.set(_extra="bad\x07tool,good_tool")
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})
    log = tmp_path / "gateway.err"

    async def scenario() -> None:
        async with connect(gateway_stdio(config, stderr=log), Notes()) as client:
            names = await tool_names(client)
            assert "good_tool" in names and not any("\x07" in name for name in names)
            with pytest.raises(MCPError, match=r"unknown tool: 'bad\\x07tool'"):
                await client.call_tool("bad\x07tool", {"text": "q"})
            assert text_of(await client.call_tool("echo", {"text": "x"})) == "flaky:x"

    anyio.run(scenario)
    assert "hidden: its name has control characters" in log.read_text()


class RawClient:
    """The gateway over stdio, spoken to line by line (to send what no SDK client would)."""

    def __init__(self, config: Path, log: Path) -> None:
        args = [PYTHON, "-m", "breaker_panel.mcp_gateway", "--config", str(config)]
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, line: str | dict[str, Any]) -> None:
        assert self.process.stdin is not None
        data = line if isinstance(line, str) else json.dumps(line)
        self.process.stdin.write(data.encode() + b"\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        reply: dict[str, Any] = json.loads(self.lines.get(timeout=30))
        return reply

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(20)
        self._log.close()


def test_malformed_json_rpc_gets_an_error_and_the_session_goes_on(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})
    log = tmp_path / "gateway.err"
    client = RawClient(config, log)
    try:
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        assert client.receive()["id"] == 1
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        expected = [
            ("{not json", None, -32700),
            ('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"x"}', 5, -32602),
            ("[1, 2]", None, -32600),
            (
                '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"a\\u0000b"}}',
                6,
                -32602,
            ),
        ]
        for line, request_id, code in expected:
            client.send(line)
            reply = client.receive()
            assert (reply["id"], reply["error"]["code"]) == (request_id, code), reply
        call = {"name": "echo", "arguments": {"text": "still"}}
        client.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call})
        assert client.receive()["result"]["content"][0]["text"] == "flaky:still"
    finally:
        client.close()
    said = log.read_text()
    assert "a client sent a malformed message: Parse error" in said
    assert "Invalid params for 'tools/call'" in said
