"""An upstream's health is an MCP request (tools/list) every health_interval: a server that
stops answering is restarted, and the tools of one that never sends list_changed are seen."""

from __future__ import annotations

from pathlib import Path

import anyio

from scripts.testing.mcp_servers import (
    Flaky,
    Notes,
    connect,
    gateway_stdio,
    tool_names,
    write_config,
)


def test_a_stuck_upstream_fails_its_health_check_and_is_restarted(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gateway.json",
        {"search": flaky.stdio()},
        health_interval=0.3,
        health_timeout=1,
        connect_timeout=20,  # a start (Python importing mcp) takes over 5 s at load 20
    )
    log = tmp_path / "gateway.err"

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config, stderr=log), notes) as client:
            assert "late_tool" not in await tool_names(client)
            # A tool added without list_changed: the next health check's tools/list sees it.
            flaky.set(_extra="late_tool")
            await notes.wait_for()
            assert "late_tool" in await tool_names(client)

            # Alive but stuck: tools/list never answers, so the check fails and it restarts.
            flaky.set(_list="hang")
            with anyio.fail_after(30):
                while "failed its health check (tools/list): no answer" not in log.read_text():
                    await anyio.sleep(0.05)
            flaky.set()
            with anyio.fail_after(60):  # started again, and answering
                while (await client.call_tool("echo", {"text": "x"})).is_error:
                    await anyio.sleep(0.1)

    anyio.run(scenario)
