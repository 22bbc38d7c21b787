"""The control-plane token reaches the gateway as an MCP client starts it: from a file
(`--token-file`) or from the variable the config's `token_env` names, set in the client's own
config (`env`), against a real control plane."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from django.db import connection
from mcp import StdioServerParameters

from runs.models import AgentToken, Run
from scripts.testing.mcp_servers import Flaky, Notes, connect, gateway_stdio, write_config
from scripts.testing.processes import WebServerProcess

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def web_server(django_db_setup: None) -> Iterator[WebServerProcess]:
    with WebServerProcess(workers=1, threads=4) as server:
        yield server.start()


def runs_of(agent: str) -> int:
    """From a worker thread: its own database connection, closed before it returns."""
    try:
        return Run.objects.filter(agent=agent).count()
    finally:
        connection.close()


async def _one_reported_call(server: StdioServerParameters, agent: str) -> None:
    async with connect(server, Notes()) as client:
        assert not (await client.call_tool("echo", {"text": "q"})).is_error
        with anyio.fail_after(30):  # reported: the control plane took the token
            while await anyio.to_thread.run_sync(runs_of, agent) < 1:
                await anyio.sleep(0.05)


def test_the_token_arrives_from_token_env_and_from_a_file(
    web_server: WebServerProcess, transactional_db: None, flaky: Flaky, tmp_path: Path
) -> None:
    token = AgentToken.issue(name="gateways")[1]
    fleet = ("--control-plane", web_server.url, "--fleet-wait", "0")

    by_env = write_config(
        tmp_path / "env.json", {"search": flaky.stdio()}, agent="by-env", token_env="DESK_TOKEN"
    )
    server = gateway_stdio(by_env, *fleet)
    server = server.model_copy(update={"env": {"DESK_TOKEN": token}})  # the client config's env
    anyio.run(_one_reported_call, server, "by-env")

    token_file = tmp_path / "panel-token"
    token_file.write_text(token + "\n")
    by_file = write_config(tmp_path / "file.json", {"search": flaky.stdio()}, agent="by-file")
    anyio.run(
        _one_reported_call,
        gateway_stdio(by_file, *fleet, "--token-file", str(token_file)),
        "by-file",
    )
