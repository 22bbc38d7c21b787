"""The Redis store itself: one slot per tool, names that cannot collide, timeouts, Cluster."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from breaker_panel.core import State
from breakers.fleet.rules import FleetPolicy, Forced, OperatorActionKind
from breakers.fleet.store import (
    FleetStore,
    Missing,
    ToolDetails,
    ToolState,
    redis_client,
)
from scripts.testing.fleet_calls import fleet_call
from scripts.testing.processes import free_port
from tests.waiting import wait_for

POLICY = FleetPolicy(threshold=3, cooldown_ms=1000, max_cooldown_ms=4000, min_workers=2)
CLOSED = ToolState(auto=State.CLOSED, forced=Forced.NONE)


def fail(store: FleetStore, tool: str, *workers: str, now: int = 0) -> list[object]:
    events = [
        fleet_call(f"{tool}-{i}-{w}-{now}", tool, w, "retryable") for i, w in enumerate(workers)
    ]
    return list(store.apply(tool, events, now=now).transitions)


@pytest.mark.parametrize("tool", ["web_search", "a}b", "{x}", "50%", "mcp/github.search", "é ✓"])
def test_every_key_of_a_tool_shares_one_hash_slot(store: FleetStore, tool: str) -> None:
    keys = [*store.tool_keys(tool), store.dedupe_key(tool, "any}event{id")]
    assert len({key_slot(key.encode()) for key in keys}) == 1


def test_names_with_braces_cannot_reach_another_tools_keys(fleet_redis: redis.Redis) -> None:
    store = FleetStore(fleet_redis, defaults=POLICY)
    for tool in ["x", "x}:seen:y", "{x}"]:
        store.restore(tool, CLOSED)
    fail(store, "x}:seen:y", "w1", "w2", "w1")
    assert store.details("x").state.consecutive == 0  # type: ignore[union-attr]
    assert store.details("{x}").state.consecutive == 0  # type: ignore[union-attr]
    assert store.details("x}:seen:y").state.auto == "open"  # type: ignore[union-attr]


def test_a_tool_without_state_is_refused_rather_than_counted_from_zero(
    store: FleetStore,
) -> None:
    with pytest.raises(Missing):
        store.apply("ghost", [fleet_call("e1", "ghost", "w1", "retryable")], now=0)
    assert store.details("ghost") == ToolDetails(None, {}, [])


def test_dedupe_keys_expire(store: FleetStore) -> None:
    store.restore("web_search", CLOSED)
    store.apply("web_search", [fleet_call("e1", "web_search", "w1", "retryable")], now=0)
    ttl_ms = store.client.pttl(store.dedupe_key("web_search", "e1"))
    assert 0 < ttl_ms <= store.dedupe_ttl_ms


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never answers (a hung Redis)."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(5)
    for conn in accepted:
        conn.close()
    listener.close()


def test_a_hung_redis_fails_the_call_within_its_timeout(silent_server: int) -> None:
    client = redis_client(f"redis://127.0.0.1:{silent_server}/0", timeout=0.3)
    store = FleetStore(client, defaults=POLICY)
    started = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        store.apply("web_search", [fleet_call("e1", "web_search", "w1", "retryable")], now=0)
    assert time.monotonic() - started < 2


# -- the same scripts on a real three-node Redis Cluster ---------------------------------------


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[RedisCluster]:
    with tempfile.TemporaryDirectory(prefix="fleet-cluster-") as workdir:
        nodes: list[subprocess.Popen[bytes]] = []
        ports = [free_port() for _ in range(3)]
        try:
            for port in ports:
                nodes.append(_start_cluster_node(port, Path(workdir)))
            wait_for(lambda: all(_pings(port) for port in ports), "cluster nodes to start")
            subprocess.run(
                ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
                 "--cluster-replicas", "0", "--cluster-yes"],
                check=True, capture_output=True, timeout=30,
            )  # fmt: skip
            wait_for(lambda: _cluster_ok(ports[0]), "the cluster to be ready")
            client = RedisCluster(host="127.0.0.1", port=ports[0], socket_timeout=2)
            yield client
            client.close()
        finally:
            for node in nodes:
                node.terminate()
                node.wait(10)


def _start_cluster_node(port: int, workdir: Path) -> subprocess.Popen[bytes]:
    args = [
        "redis-server", "--port", str(port), "--cluster-enabled", "yes",
        "--cluster-port", str(free_port()), "--cluster-config-file", f"nodes-{port}.conf",
        "--dir", str(workdir), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
    ]  # fmt: skip
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _pings(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_timeout=0.5).ping())
    except redis.ConnectionError:
        return False


def _cluster_ok(port: int) -> bool:
    info = redis.Redis(port=port, socket_timeout=0.5).cluster("INFO")
    return bool(info.get("cluster_state") == "ok")


def test_the_scripts_run_unchanged_on_redis_cluster(redis_cluster: RedisCluster) -> None:
    store = FleetStore(redis_cluster, defaults=POLICY)  # type: ignore[arg-type]
    tools = [f"tool-{i}" for i in range(6)]  # spread over the nodes' slots
    for tool in tools:
        store.restore(tool, CLOSED)
        assert fail(store, tool, "w1", "w2", "w1", now=1000)
    assert store.advance(tools[0], now=2000)[1].auto == "half_open"
    grant = store.acquire(tools[0], holder="agent:w3", ttl_ms=500, now=2000)
    assert grant.granted
    result = store.operate(tools[1], action=OperatorActionKind.FORCE_CLOSE, reason="x", now=3)
    assert result is not None and result.after.state == "forced_closed"
    _, states = store.snapshot()
    assert sorted(states) == tools
    assert states[tools[0]].auto == "half_open"
    assert store.details(tools[2]).state.auto == "open"  # type: ignore[union-attr]
