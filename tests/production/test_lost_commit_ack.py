"""A batch whose COMMIT landed but whose acknowledgement was lost (issue 23, finding 6): the
answer and the fleet counters agree with what is stored. gunicorn as deployed talks to the test
PostgreSQL through a TCP proxy that can swallow the server's answer to one COMMIT."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.db import connection

from breakers.fleet_service import fleet_store
from runs.models import AgentToken, ToolCall
from scripts.testing.processes import database_url_of_test_db
from tests.production.servers import ProductionWebServer

pytestmark = pytest.mark.django_db(transaction=True)

COMMIT = b"COMMIT\x00"  # in the client's Query/Parse message and the server's CommandComplete


class LossyPostgresProxy:
    """Forwards connections to PostgreSQL; armed, it lets the next COMMIT through to the server,
    waits for the server's confirmation and then cuts the client off instead of passing it on.
    With ``then_refuse`` it also refuses new connections until ``accept_again()``."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._armed = False
        self._then_refuse = False
        self.refusing = threading.Event()
        self.lost = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def lose_next_commit_ack(self, *, then_refuse: bool = False) -> None:
        with self._lock:
            self._armed, self._then_refuse = True, then_refuse
            self.lost.clear()

    def accept_again(self) -> None:
        self.refusing.clear()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing.is_set():
                client.close()
                continue
            server = socket.create_connection(self.upstream, timeout=30)
            server.settimeout(None)
            pair = {"commit_sent": False}
            threading.Thread(
                target=self._pump, args=(client, server, pair, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, pair, False), daemon=True
            ).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, pair: dict[str, bool], up: bool
    ) -> None:
        try:
            while data := src.recv(65_536):
                if up and COMMIT in data:
                    with self._lock:
                        if self._armed:
                            self._armed, pair["commit_sent"] = False, True
                elif not up and pair["commit_sent"] and COMMIT in data:
                    # The server committed; the client never hears of it.
                    if self._then_refuse:
                        self.refusing.set()
                    self.lost.set()
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):  # shutdown wakes the other pump, blocked reading its socket
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _tool_call(run_id: str, n: int) -> dict[str, Any]:
    return {
        "id": f"{run_id}-tc-{n}", "type": "tool.call", "ts": "2026-11-29T09:00:00Z",
        "run_id": run_id, "step": 1, "tool": "web_search", "outcome": "retryable",
        "attempts": 1, "error": "ToolFailure: 503 from vendor",
    }  # fmt: skip


def _delete_fleet_keys(client: redis.Redis) -> None:
    if keys := list(client.scan_iter(match="bp:*", count=1000)):
        client.delete(*keys)


def _without_ssl(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query="sslmode=disable"))  # the proxy reads the protocol


@pytest.fixture
def proxy(transactional_db: None) -> Iterator[LossyPostgresProxy]:
    db = connection.settings_dict
    lossy = LossyPostgresProxy((db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432)))
    yield lossy
    lossy.close()


@pytest.fixture
def lossy_web(static_root: Path, proxy: LossyPostgresProxy) -> Iterator[ProductionWebServer]:
    try:
        url = urlsplit(database_url_of_test_db())
    except LookupError as exc:
        pytest.skip(str(exc))
    if not url.scheme.startswith("postgres"):
        pytest.skip("the proxy speaks to PostgreSQL")
    through_proxy = _without_ssl(
        urlunsplit(url._replace(netloc=f"{url.netloc.rpartition('@')[0]}@127.0.0.1:{proxy.port}"))
    )
    with ProductionWebServer(workers=1) as server:
        server.start(STATIC_ROOT=str(static_root), database_url=through_proxy)
        yield server


@pytest.fixture
def fleet_keys() -> Iterator[redis.Redis]:
    client = fleet_store().client
    _delete_fleet_keys(client)  # not FLUSHDB: the Celery broker shares the database
    yield client
    _delete_fleet_keys(client)


def _post(server: ProductionWebServer, token: str, events: list[Any]) -> tuple[int, Any]:
    request = urllib.request.Request(
        server.url + "/api/v1/events",
        data=json.dumps({"worker_id": "w1", "events": events}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def _counted(tool: str) -> int:
    state = fleet_store().details(tool).state
    return state.consecutive if state is not None else 0


def _batch(run_id: str) -> list[Any]:
    started = {
        "id": f"{run_id}-start", "type": "run.started", "ts": "2026-11-29T09:00:00Z",
        "run_id": run_id, "agent": "research", "step_budget": 20,
    }  # fmt: skip
    return [started, *(_tool_call(run_id, n) for n in range(3))]


def test_a_commit_whose_acknowledgement_was_lost_is_answered_200_and_counted(
    lossy_web: ProductionWebServer, proxy: LossyPostgresProxy, fleet_keys: redis.Redis
) -> None:
    _token, raw = AgentToken.issue(name="agents")
    events = _batch("r-ack")
    proxy.lose_next_commit_ack()
    status, reply = _post(lossy_web, raw, events)
    assert proxy.lost.is_set()  # the answer to the batch's COMMIT never reached the server
    # Before: 503 "nothing was written", with the rows stored and the fleet never told.
    assert (status, reply["accepted"]) == (200, 4), reply
    assert ToolCall.objects.filter(run__run_id="r-ack").count() == 3
    assert _counted("web_search") == 3
    status, reply = _post(lossy_web, raw, events)
    assert (status, reply["duplicates"]) == (200, 4)
    assert _counted("web_search") == 3


def test_when_the_outcome_cannot_be_checked_the_resend_is_counted_once(
    lossy_web: ProductionWebServer, proxy: LossyPostgresProxy, fleet_keys: redis.Redis
) -> None:
    _token, raw = AgentToken.issue(name="agents")
    events = _batch("r-unknown")
    proxy.lose_next_commit_ack(then_refuse=True)  # and PostgreSQL stays unreachable a while
    status, reply = _post(lossy_web, raw, events)
    assert proxy.lost.is_set()
    assert status == 503
    assert "may have been written" in reply["detail"]  # not "nothing was written": it was
    assert ToolCall.objects.filter(run__run_id="r-unknown").count() == 3
    assert _counted("web_search") == 0

    proxy.accept_again()
    status, reply = _post(lossy_web, raw, events)  # the agent resends, as told
    assert (status, reply["accepted"], reply["duplicates"]) == (200, 0, 4)
    assert _counted("web_search") == 3  # before: 0, for good
    status, reply = _post(lossy_web, raw, events)
    assert (status, reply["duplicates"]) == (200, 4)
    assert _counted("web_search") == 3
