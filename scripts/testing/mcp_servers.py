"""For the MCP tests and benchmark: a flaky upstream on command, a gateway a real client talks to.

The gateway and the upstreams are real processes (`python -m breaker_panel.mcp_gateway`,
`python -m scripts.testing.mcp_upstream`); the client is the `mcp` package's own `Client`.
Waits are for events (a notification, a port that answers), each with a deadline, never a
fixed sleep.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from scripts.testing.processes import ROOT, free_port

PYTHON = sys.executable
LIST_CHANGED = "notifications/tools/list_changed"


@dataclass
class Flaky:
    """One flaky upstream's control file: set a tool's mode, count the calls that reached it."""

    state: Path
    name: str = "flaky"

    def set(self, **modes: str) -> None:
        self.state.write_text(json.dumps(modes))

    def calls(self, tool: str | None = None) -> int:
        log = self.state.with_name(self.state.name + ".calls")
        lines = log.read_text().split() if log.exists() else []
        return len(lines) if tool is None else lines.count(tool)

    def stdio(self, *, delay: float = 0.0, gate: Path | None = None) -> dict[str, Any]:
        """Its stdio config; with `delay` or `gate`, a slow starter (see mcp_upstream.py)."""
        args = [
            "-m",
            "scripts.testing.mcp_upstream",
            "--state",
            str(self.state),
            "--name",
            self.name,
        ]
        if delay:
            args += ["--delay", str(delay)]
        if gate is not None:
            args += ["--gate", str(gate)]
        return {"command": PYTHON, "args": args, "cwd": str(ROOT)}


def write_config(path: Path, servers: dict[str, Any], **options: Any) -> Path:
    breaker = {"cooldown": 0.5, "check_interval": 0.1} | options.pop("breaker", {})
    path.write_text(json.dumps({"servers": servers, "breaker": breaker, **options}))
    return path


def gateway_stdio(config: Path, *extra: str, stderr: Path | None = None) -> StdioServerParameters:
    """How an MCP client starts the gateway; with `stderr`, its log is appended to that file."""
    args = ["-m", "breaker_panel.mcp_gateway", "--config", str(config), *extra]
    if stderr is None:
        return StdioServerParameters(command=PYTHON, args=args, cwd=str(ROOT))
    shell = ["-c", f'exec "$0" "$@" 2>>"{stderr}"', PYTHON, *args]
    return StdioServerParameters(command="/bin/sh", args=shell, cwd=str(ROOT))


@dataclass
class Notes:
    """The notifications a client received, to wait on."""

    received: list[str] = field(default_factory=list)
    _send: Any = None
    _receive: Any = None

    def __post_init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[str](math.inf)

    async def handler(self, message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if isinstance(method, str):
            self.received.append(method)
            await self._send.send(method)

    async def wait_for(self, method: str = LIST_CHANGED, timeout: float = 20) -> None:
        with anyio.fail_after(timeout):
            while await self._receive.receive() != method:
                pass

    def count(self, method: str = LIST_CHANGED) -> int:
        return self.received.count(method)


@asynccontextmanager
async def connect(server: Any, notes: Notes, **options: Any) -> AsyncIterator[Client]:
    """A real MCP client (handshake era, as desktop clients speak) with `notes` as its handler."""
    options.setdefault("mode", "legacy")
    async with Client(server, message_handler=notes.handler, cache=None, **options) as client:
        yield client


async def tool_names(client: Client) -> list[str]:
    return [tool.name for tool in (await client.list_tools()).tools]


class Process:
    """A child process serving HTTP on a free port, waited for and always stopped."""

    def __init__(self, args: list[str], log: Path, port: int) -> None:
        self.port = port
        self.log = log
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [PYTHON, *args], cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def wait_ready(self, timeout: float = 60) -> Process:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"exited during start-up:\n{self.log.read_text()[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"not listening within {timeout:g} s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()


def start_flaky_http(flaky: Flaky, processes: list[Process], tmp_path: Path) -> Process:
    port = free_port()
    args = ["-m", "scripts.testing.mcp_upstream", "--state", str(flaky.state), "--http", str(port)]
    process = Process(args, tmp_path / f"flaky-{port}.log", port)
    processes.append(process)
    return process.wait_ready()


def start_gateway_http(
    config: Path, processes: list[Process], tmp_path: Path, *extra: str
) -> Process:
    port = free_port()
    args = ["-m", "breaker_panel.mcp_gateway", "--config", str(config), "--http", str(port)]
    process = Process([*args, *extra], tmp_path / f"gateway-{port}.log", port)
    processes.append(process)
    return process.wait_ready()
