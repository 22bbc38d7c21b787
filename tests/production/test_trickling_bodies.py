"""Bodies that trickle in hold no database connection: the body is read whole, within
REQUEST_BODY_TIMEOUT_SECONDS, before anything takes one (issue 23, finding 2). Against gunicorn
as deployed (gevent workers) on PostgreSQL, with raw sockets."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from runs.models import AgentToken, Run
from scripts.testing.processes import database_url_of_test_db
from tests.production.servers import ProductionWebServer

pytestmark = pytest.mark.django_db(transaction=True)

TRICKLERS = 20
ROUTES = ("/api/v1/events", "/v1/traces")


# The server's backends are told apart from any other session's on the test database by this.
APP_NAME = f"bp-trickling-{uuid.uuid4().hex[:8]}"


def _server() -> ProductionWebServer:
    try:
        database_url_of_test_db()
    except LookupError as exc:
        pytest.skip(str(exc))
    return ProductionWebServer(workers=2)


@pytest.fixture
def web(static_root: Path, transactional_db: None) -> Iterator[ProductionWebServer]:
    with _server() as server:
        server.start(
            STATIC_ROOT=str(static_root), REQUEST_BODY_TIMEOUT_SECONDS="120", PGAPPNAME=APP_NAME
        )
        yield server


@pytest.fixture
def impatient_web(static_root: Path, transactional_db: None) -> Iterator[ProductionWebServer]:
    with _server() as server:
        server.start(STATIC_ROOT=str(static_root), REQUEST_BODY_TIMEOUT_SECONDS="1")
        yield server


def _open_trickler(port: int, path: str, raw_token: str) -> socket.socket:
    """An authenticated POST that promises 100,000 bytes and sends its first few."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {raw_token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{".encode()
    )
    return sock


@pytest.fixture
def tricklers(web: ProductionWebServer) -> Iterator[list[socket.socket]]:
    _token, raw = AgentToken.issue(name="trickler")
    sockets = [_open_trickler(web.port, ROUTES[n % 2], raw) for n in range(TRICKLERS)]
    stop = threading.Event()

    def trickle() -> None:  # one more byte each, every 200 ms, as a slowloris client does
        while not stop.wait(0.2):
            for sock in sockets:
                with contextlib.suppress(OSError):
                    sock.sendall(b" ")

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    yield sockets
    stop.set()
    sender.join(timeout=5)
    for sock in sockets:
        sock.close()


def _ingest(server: ProductionWebServer, raw_token: str) -> int:
    body = {
        "worker_id": "steady-worker",
        "events": [
            {
                "id": uuid.uuid4().hex,
                "type": "run.started",
                "ts": "2026-12-01T10:00:00Z",
                "run_id": uuid.uuid4().hex,
                "agent": "research",
                "step_budget": 20,
            }
        ],
    }
    request = urllib.request.Request(
        server.url + "/api/v1/events",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {raw_token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status


def _server_connections() -> int:
    """The web server's backends on the test database (libpq's PGAPPNAME names them)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            [APP_NAME],
        )
        return int(cursor.fetchone()[0])


def test_trickling_bodies_hold_no_database_connection(
    web: ProductionWebServer, tricklers: list[socket.socket]
) -> None:
    _token, raw = AgentToken.issue(name="steady")
    assert [_ingest(web, raw) for _ in range(5)] == [200] * 5
    # Sampled for a while (an ingest's own connection may still be closing): before the fix
    # each authenticated trickler held a connection from its headers on, as long as it trickled.
    held = []
    for _ in range(15):
        held.append(_server_connections())
        time.sleep(0.1)
    assert min(held) == 0, held
    assert Run.objects.filter(worker__worker_id="steady-worker").count() == 5


def test_a_body_that_does_not_arrive_in_time_is_answered_408(
    impatient_web: ProductionWebServer,
) -> None:
    _token, raw = AgentToken.issue(name="stalled")
    for path in (*ROUTES, "/accounts/login/"):
        sock = _open_trickler(impatient_web.port, path, raw)
        try:
            reply = b""
            while chunk := sock.recv(65_536):  # the server closes after its answer
                reply += chunk
        finally:
            sock.close()
        assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
        assert b"did not arrive within 1 s" in reply
    assert _ingest(impatient_web, raw) == 200


def test_a_body_cut_short_is_refused_before_the_token_is_looked_up(
    web: ProductionWebServer,
) -> None:
    """A client that hangs up part-way gets 400 without reaching auth (a database query): when
    200 tricklers disconnect at once, none of them takes a connection."""
    for path in ROUTES:
        sock = _open_trickler(web.port, path, "not-a-token")
        try:
            sock.shutdown(socket.SHUT_WR)
            reply = b""
            while chunk := sock.recv(65_536):
                reply += chunk
        finally:
            sock.close()
        assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
        assert b"ended before its Content-Length" in reply
