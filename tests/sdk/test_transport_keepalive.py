"""Kept-alive connections: each sending thread reuses one connection for its batches; one the
server closed while idle costs a second send on a fresh connection, never the batch; the
long-poll keeps its fresh connection; the plane's close() closes what is kept.
Real HTTP/1.1 servers on free local ports (the http.server module), counting connections."""

from __future__ import annotations

import socket
import statistics
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from breaker_panel import ControlPlane, PlaneConfig
from breaker_panel.client.transport import Transport
from scripts.testing.events_server import FLEET, JsonHandler, LocalServer, accepted
from tests.waiting import wait_for

OK = (200, {"accepted": 0, "duplicates": 0, "rejected": []}, {})


class KeepAliveServer(LocalServer):
    """HTTP/1.1 with keep-alive: takes event batches and counts connections. ``idle_timeout``
    closes a connection idle that long; ``close_with`` says how (``"fin"``, or ``"reset"`` by
    RST); ``reply(nth POST)`` may answer otherwise: a status, a body and headers; raw bytes to
    write before hanging up; None to hang up at once."""

    def __init__(
        self,
        *,
        idle_timeout: float | None = None,
        close_with: str = "fin",
        reply: Callable[[int], tuple[int, Any, dict[str, str]] | bytes | None] | None = None,
    ) -> None:
        self.connections = 0  # accepted
        self.open = 0  # still open on the server's side
        self.batches: list[list[dict[str, Any]]] = []
        self.posted_on: list[int] = []  # which connection (its number) each POST came on
        self.lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            protocol_version = "HTTP/1.1"
            timeout = idle_timeout  # a socket timeout: handle() ends, the server closes

            def setup(self) -> None:
                super().setup()
                with server.lock:
                    server.connections += 1
                    server.open += 1
                    self.number = server.connections

            def finish(self) -> None:
                if close_with == "reset":  # close by RST: no FIN for the client to see first
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                super().finish()
                with server.lock:
                    server.open -= 1

            def do_GET(self) -> None:
                self.answer(200, FLEET)

            def do_POST(self) -> None:
                events = self.read_json()["events"]
                with server.lock:
                    server.batches.append(events)
                    server.posted_on.append(self.number)
                    nth = len(server.batches)
                answer = reply(nth) if reply else (*accepted(events), {})
                if answer is None or isinstance(answer, bytes):
                    self.wfile.write(answer or b"")
                    self.close_connection = True  # hang up
                    return
                self.answer(*answer)

        super().__init__(Handler)

    def ids(self) -> list[str]:
        with self.lock:
            return [event["id"] for batch in self.batches for event in batch]


@pytest.fixture
def servers() -> Iterator[Callable[..., KeepAliveServer]]:
    started: list[KeepAliveServer] = []

    def start(**options: Any) -> KeepAliveServer:
        started.append(KeepAliveServer(**options))
        return started[-1]

    yield start
    for server in started:
        server.close()


def post(transport: Transport) -> int:
    return transport.request("POST", "/api/v1/events", b'{"worker_id": "w1", "events": []}')[0]


def new_plane(url: str, **settings: Any) -> ControlPlane:
    # Batches go on flush() only (what is buffered is what the next one sends); no long-poll and
    # a slow poll, so the fleet thread stays out of the way.
    defaults: dict[str, Any] = {
        "flush_interval": 60,
        "fleet_wait": 0,
        "fleet_poll_interval": 3600,
        "timeout": 2.0,
    }
    config = PlaneConfig(**{**defaults, **settings})
    return ControlPlane(url, token="bp_test", worker_id="w1", config=config)


def record_batches(plane: ControlPlane, count: int, pause: float = 0.0) -> list[str]:
    """``count`` batches of one run's events each, flushed one by one; the ids sent."""
    sent: list[str] = []
    for _ in range(count):
        run = plane.start_run(agent="research")
        run.record_success("web_search")
        run.finish()
        sent += [event["id"] for event in plane.buffered()]
        assert plane.flush(timeout=5)
        time.sleep(pause)
    return sent


# -- reuse ------------------------------------------------------------------------------------


def test_one_thread_sends_every_request_on_one_connection(
    servers: Callable[..., KeepAliveServer],
) -> None:
    server = servers()
    transport = Transport(server.url, token="t", timeout=2)
    assert [post(transport) for _ in range(5)] == [200] * 5
    assert server.connections == 1


def test_the_long_poll_goes_on_a_fresh_connection_and_leaves_the_kept_one_alone(
    servers: Callable[..., KeepAliveServer],
) -> None:
    server = servers()
    transport = Transport(server.url, token="t", timeout=2)
    assert post(transport) == 200
    assert transport.request("GET", "/api/v1/fleet?wait=1", None, timeout=3)[0] == 200
    assert post(transport) == 200
    assert server.connections == 2  # the kept one, and the poll's own (closed after it)
    assert server.posted_on == [1, 1]
    wait_for(lambda: server.open == 1, "the poll's connection to close")


def test_each_thread_keeps_its_own_connection(servers: Callable[..., KeepAliveServer]) -> None:
    server = servers()
    transport = Transport(server.url, token="t", timeout=2)

    def three() -> None:
        for _ in range(3):
            assert post(transport) == 200

    threads = [threading.Thread(target=three) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(server.posted_on) == 6
    assert server.connections == 2


def test_consecutive_batches_of_a_plane_reuse_one_connection(
    servers: Callable[..., KeepAliveServer],
) -> None:
    server = servers()
    plane = new_plane(server.url)
    try:
        sent = record_batches(plane, 5)
    finally:
        assert plane.close(timeout=3)
    assert len(server.batches) >= 5
    assert set(server.posted_on) == {server.posted_on[0]}  # every batch on the same connection
    assert sorted(server.ids()) == sorted(sent)
    # One for the batches, one for the fleet's first poll (a poll has a connection of its own).
    assert server.connections == 2
    wait_for(lambda: server.open == 0, "close() to close the kept connection")


@pytest.mark.skipif(sys.platform != "linux", reason="TCP_QUICKACK is Linux's")
def test_a_server_without_nodelay_does_not_wait_for_a_delayed_ack(
    servers: Callable[..., KeepAliveServer],
) -> None:
    # http.server, like Django's runserver, sends the headers and the body apart without
    # TCP_NODELAY: the body waits for the ACK of the headers, which Linux delays 40 ms on a
    # kept connection unless the client asks for a quick one.
    server = servers()
    transport = Transport(server.url, token="t", timeout=2)
    took = []
    for _ in range(15):
        started = time.perf_counter()
        assert post(transport) == 200
        took.append(time.perf_counter() - started)
    assert server.connections == 1
    assert statistics.median(took) < 0.025  # 40 ms and more without the quick ACK


# -- a kept connection the server closed --------------------------------------------------------


@pytest.mark.parametrize("close_with", ["fin", "reset"])
def test_a_server_closing_idle_connections_between_batches_loses_nothing(
    servers: Callable[..., KeepAliveServer], close_with: str
) -> None:
    server = servers(idle_timeout=0.05, close_with=close_with)
    plane = new_plane(server.url, backoff_base=10.0)
    try:
        sent = record_batches(plane, 4, pause=0.3)  # each pause outlasts the server's idle timeout
        wait_for(lambda: server.open == 0, "the server to close the idle connection")
        stats = plane.stats
        # Sent again at once on a fresh connection: never a failed attempt (nor a 10 s backoff).
        assert (stats.failed_attempts, stats.dropped) == (0, 0)
    finally:
        assert plane.close(timeout=3)
    ids = server.ids()
    assert sorted(ids) == sorted(sent)  # every event arrived, and once
    assert len(set(server.posted_on)) == len(server.batches)  # each batch on a new connection


def test_connection_close_replies_are_honoured(servers: Callable[..., KeepAliveServer]) -> None:
    server = servers(reply=lambda nth: (200, {}, {"Connection": "close"}))
    transport = Transport(server.url, token="t", timeout=2)
    assert [post(transport) for _ in range(3)] == [200] * 3
    assert server.connections == 3
    wait_for(lambda: server.open == 0, "every connection to be closed")


def test_a_server_hanging_up_on_a_fresh_connection_is_not_sent_again(
    servers: Callable[..., KeepAliveServer],
) -> None:
    # Only a kept connection is retried: on a fresh one, no answer is no answer (status 0).
    server = servers(reply=lambda nth: None)
    transport = Transport(server.url, token="t", timeout=2)
    assert post(transport) == 0
    assert len(server.batches) == 1


def test_no_status_line_on_a_kept_connection_is_sent_once_more_and_only_once(
    servers: Callable[..., KeepAliveServer],
) -> None:
    # The server read the 2nd request and hung up: indistinguishable from a connection closed
    # while idle, so it goes once more on a fresh connection (the server dedupes by event id).
    server = servers(reply=lambda nth: None if nth in (2, 4, 5) else OK)
    transport = Transport(server.url, token="t", timeout=2)
    assert post(transport) == 200  # 1
    assert post(transport) == 200  # 2 hung up, 3 answered on a fresh connection
    assert post(transport) == 0  # 4 hung up, 5 hung up on the fresh one: no third send
    assert len(server.batches) == 5
    assert server.posted_on == [1, 1, 2, 2, 3]


def test_a_failure_after_the_status_line_is_not_sent_again(
    servers: Callable[..., KeepAliveServer],
) -> None:
    # The 2nd answer promises a longer body than it sends: the server answered, so this stays
    # a failure (status 0) as before keep-alive, and the next request goes on a new connection.
    short = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}"
    server = servers(reply=lambda nth: short if nth == 2 else OK)
    transport = Transport(server.url, token="t", timeout=2)
    assert [post(transport) for _ in range(3)] == [200, 0, 200]
    assert server.posted_on == [1, 1, 2]


# -- closing ----------------------------------------------------------------------------------


def test_close_closes_the_kept_connections_and_keeps_no_more(
    servers: Callable[..., KeepAliveServer],
) -> None:
    server = servers()
    transport = Transport(server.url, token="t", timeout=2)
    assert post(transport) == 200
    transport.close()
    wait_for(lambda: server.open == 0, "the kept connection to close")
    assert post(transport) == 200  # requests still go, each on its own connection
    assert server.connections == 2
    wait_for(lambda: server.open == 0, "the connection after close() to close too")


def test_the_plane_closes_in_time_while_its_kept_connection_waits_on_a_silent_server(
    servers: Callable[..., KeepAliveServer],
) -> None:
    # The 2nd batch is never answered: the sender waits on its kept connection (timeout 2 s)
    # while close() gives up after 0.5 s; the connection is closed when that request ends.
    answered = threading.Event()
    server = servers(reply=lambda nth: OK if nth == 1 else answered.wait(10) and None)
    plane = new_plane(server.url, backoff_base=10.0)
    try:
        record_batches(plane, 1)
        plane.start_run(agent="research").finish()
        assert not plane.flush(timeout=0.1)
        wait_for(lambda: len(server.batches) == 2, "the second batch to be sent")
        started = time.monotonic()
        assert not plane.close(timeout=0.5)
        assert time.monotonic() - started < 1.0
        assert plane.pending() == 2
        wait_for(lambda: not plane.sender.thread or not plane.sender.thread.is_alive())
        assert server.posted_on[0] == server.posted_on[1]  # on the kept connection
        assert plane.pending() == 2  # back in the buffer, not lost
    finally:
        answered.set()
    wait_for(lambda: server.open == 0, "the kept connection to close after its request")
