"""Closing cuts the fleet long-poll: a held request that has not connected yet when the cut
comes must not start its hold afterwards (found as a rare 20 s wait in close())."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from breaker_panel.client.transport import Transport


@pytest.fixture
def silent_server() -> Iterator[socket.socket]:
    """Accepts connections and never answers: a held request stays held until it is cut."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    yield listener
    listener.close()


def transport_for(listener: socket.socket) -> Transport:
    port = listener.getsockname()[1]
    return Transport(f"http://127.0.0.1:{port}", token="t", timeout=5)


def test_a_held_request_after_the_cut_gives_up_without_connecting(
    silent_server: socket.socket,
) -> None:
    transport = transport_for(silent_server)
    transport.cut_held()
    assert transport.request("GET", "/api/v1/fleet?wait=20", None, timeout=20) == (0, {}, None)
    with pytest.raises(BlockingIOError):
        silent_server.accept()  # nothing connected
    assert transport.held is None


def test_a_cut_ends_the_request_being_held(silent_server: socket.socket) -> None:
    transport = transport_for(silent_server)
    replies: list[tuple[int, dict[str, str], object]] = []
    thread = threading.Thread(
        target=lambda: replies.append(transport.request("GET", "/x", None, timeout=60))
    )
    thread.start()
    silent_server.setblocking(True)
    peer, _ = silent_server.accept()  # connected: from here on it is held
    try:
        while transport.held is None and thread.is_alive():
            thread.join(0.01)
        transport.cut_held()
        thread.join(30)  # the hold is 60 s: only a cut that works ends it before
        assert not thread.is_alive()
        assert replies == [(0, {}, None)]
    finally:
        peer.close()


def test_requests_that_are_not_held_still_go_after_the_cut(silent_server: socket.socket) -> None:
    # The final flush of close() may still send: the cut is for the long-poll only.
    transport = Transport(
        f"http://127.0.0.1:{silent_server.getsockname()[1]}", token="t", timeout=0.2
    )
    transport.cut_held()
    assert transport.request("POST", "/api/v1/events", b"{}") == (0, {}, None)  # timed out
    silent_server.setblocking(True)
    peer, _ = silent_server.accept()  # but it did connect
    peer.close()
