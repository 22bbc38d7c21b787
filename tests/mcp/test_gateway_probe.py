"""A half-open tool nobody calls gets its trial from the gateway: the probe call its upstream's
config names, made once no client call came within `probe_after`; under the fleet's trial lease,
so two gateways never make two trials at once."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from breaker_panel.mcp_gateway.config import ConfigError, GatewayConfig
from scripts.testing.mcp_servers import (
    Flaky,
    Notes,
    connect,
    gateway_stdio,
    tool_names,
    write_config,
)

PROBE = {"web_search": {"arguments": {"text": "probe"}}}


def probing(flaky: Flaky) -> dict[str, object]:
    return flaky.stdio() | {"probes": PROBE}


async def calls_reach(flaky: Flaky, count: int) -> None:
    with anyio.fail_after(30):
        while flaky.calls("web_search") < count:
            await anyio.sleep(0.02)


def test_a_half_open_tool_nobody_calls_is_probed_until_it_closes(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gateway.json",
        {"search": probing(flaky)},
        probe_after=0.3,
        breaker={"threshold": 2, "cooldown": 0.5, "check_interval": 0.05},
    )
    log = tmp_path / "gateway.err"

    async def scenario() -> None:
        notes = Notes()
        gateway = gateway_stdio(config, "--log-level", "INFO", stderr=log)
        async with connect(gateway, notes) as client:
            await tool_names(client)
            flaky.set(web_search="fail")
            for _ in range(2):
                assert (await client.call_tool("web_search", {"text": "q"})).is_error
            await notes.wait_for()
            assert "web_search" not in await tool_names(client)
            # No client calls it again. Still failing: the probe is the trial, and fails.
            await calls_reach(flaky, 3)
            await notes.wait_for()  # offered for its trial
            await notes.wait_for()  # the probe failed: hidden again
            assert "web_search" not in await tool_names(client)
            flaky.set()
            await calls_reach(flaky, 4)  # after the longer cooldown, the next probe passes
            with anyio.fail_after(30):
                while "probe of web_search (no client call came): ok" not in log.read_text():
                    await anyio.sleep(0.02)
            # Closed: no more probes (40 check intervals), and the client's call goes through.
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                assert flaky.calls("web_search") == 4
                await anyio.sleep(0.05)
            assert "web_search" in await tool_names(client)
            answer = await client.call_tool("web_search", {"text": "back"})
            assert not answer.is_error and answer.content[0].text == "flaky:back"  # type: ignore[union-attr]

    anyio.run(scenario)
    said = log.read_text()
    assert said.count("probe of web_search (no client call came): failed") == 1


def test_a_client_call_in_time_is_the_trial_and_no_probe_is_made(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gateway.json",
        {"search": probing(flaky)},
        probe_after=60,
        breaker={"threshold": 2, "cooldown": 0.5, "check_interval": 0.05},
    )

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config), notes) as client:
            await tool_names(client)
            flaky.set(web_search="fail")
            for _ in range(2):
                await client.call_tool("web_search", {"text": "q"})
            await notes.wait_for()
            flaky.set()
            await notes.wait_for()  # offered for its trial: the client's next call makes it
            trial = await client.call_tool("web_search", {"text": "mine"})
            assert not trial.is_error and trial.content[0].text == "flaky:mine"  # type: ignore[union-attr]
            assert flaky.calls("web_search") == 3

    anyio.run(scenario)


@pytest.mark.parametrize(
    ("probes", "message"),
    [
        ("x", "servers.search.probes must be a JSON object"),
        ({"web_search": {"args": {}}}, "servers.search.probes.web_search: unknown field 'args'"),
        ({"web_search": {"arguments": []}}, "probes.web_search.arguments must be a JSON object"),
    ],
)
def test_a_bad_probe_config_names_the_field(probes: object, message: str) -> None:
    servers = {"search": {"command": "server", "probes": probes}}
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        GatewayConfig.from_dict({"servers": servers})


def test_probe_after_must_be_positive() -> None:
    servers = {"search": {"command": "server"}}
    with pytest.raises(ConfigError, match="probe_after must be a number of seconds above 0"):
        GatewayConfig.from_dict({"servers": servers, "probe_after": 0})
    assert GatewayConfig.from_dict({"servers": servers}).probe_after == 10.0
