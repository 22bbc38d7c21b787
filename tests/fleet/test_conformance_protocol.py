"""sdk/conformance/protocol/: each exchange replayed against the real control plane (ingest and
the fleet API, Redis and PostgreSQL), and each events case's batch, as the Python SDK builds it,
accepted by the server once and then only as duplicates.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.test import Client
from django.utils import timezone

from breakers.fleet_service import fleet_tick
from runs.models import AgentToken
from tests.conformance_runner import Case, CaseError, Matcher, build_batch, cases, check_batch

pytestmark = pytest.mark.django_db(transaction=True)

EXCHANGE_CASES = cases("protocol/ingest.json") + cases("protocol/fleet.json")
EVENT_CASES = cases("protocol/events.json")


class Exchanges:
    """Plays one case's exchanges in order, keeping the last ETag seen (README, "Exchanges")."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.tokens = {
            "agent": AgentToken.issue(name="conformance")[1],
            "operator": AgentToken.issue(name="conformance-ops", is_operator=True)[1],
            "wrong": "bp_not_a_token",
        }
        self.worker_tokens: dict[str, str] = {}
        self.etag: str | None = None

    def token_for(self, request: dict[str, Any]) -> str:
        """An ``agent`` request naming a worker goes with that worker's own token, bound to it
        (the README: each worker has its own; the default quorum counts tokens)."""
        body = request.get("json")
        worker = body.get("worker_id") if isinstance(body, dict) else None
        if request["auth"] != "agent" or not isinstance(worker, str) or not worker:
            return self.tokens[request["auth"]]
        if worker not in self.worker_tokens:
            bound = AgentToken.issue(name=f"conformance {worker}", worker_id=worker)[1]
            self.worker_tokens[worker] = bound
        return self.worker_tokens[worker]

    def play(self, exchange: dict[str, Any]) -> None:
        if "control_plane" in exchange:
            # The control plane's clock moves on and its periodic tick (Celery beat) runs.
            fleet_tick(now=timezone.now() + timedelta(seconds=exchange["control_plane"]["tick"]))
            return
        response = self.send(exchange["request"])
        self.check(exchange["answer"], response)

    def send(self, request: dict[str, Any]) -> Any:
        headers: dict[str, str] = {}
        if request["auth"] != "none":
            headers["Authorization"] = f"Bearer {self.token_for(request)}"
        if request.get("if_none_match") == "last":
            if self.etag is None:
                raise CaseError("if_none_match: no ETag seen yet in this case")
            headers["If-None-Match"] = self.etag
        if "json" in request:
            body = json.dumps(request["json"]).encode()
        else:
            body = request.get("body", "").encode()
        return self.client.generic(
            request["method"],
            request["path"],
            data=body if request["method"] != "GET" else b"",
            content_type="application/json",
            headers=headers,
        )

    def check(self, answer: dict[str, Any], response: Any) -> None:
        if response.status_code != answer["status"]:
            raise CaseError(
                f"status {response.status_code}, expected {answer['status']}: "
                f"{response.content[:300]!r}"
            )
        if "json" in answer:
            Matcher().check(answer["json"], json.loads(response.content), "$")
        etag = response.get("ETag")
        if answer.get("etag") == "new" and (etag is None or etag == self.etag):
            raise CaseError(f"expected a new ETag, got {etag!r} (last {self.etag!r})")
        if answer.get("etag") == "same" and etag != self.etag:
            raise CaseError(f"expected the ETag {self.etag!r} again, got {etag!r}")
        if etag is not None:
            self.etag = etag


@pytest.mark.parametrize("case", EXCHANGE_CASES, ids=lambda case: case.id)
def test_the_control_plane_answers_as_the_case_says(
    case: Case, client: Client, fleet_redis: redis.Redis
) -> None:
    exchanges = Exchanges(client)
    for number, exchange in enumerate(case.data["exchanges"]):
        try:
            exchanges.play(exchange)
        except CaseError as exc:
            raise CaseError(f"exchange {number}: {exc}") from exc


@pytest.mark.parametrize("case", EVENT_CASES, ids=lambda case: case.id)
def test_the_sdks_batch_is_taken_once(case: Case, client: Client, fleet_redis: redis.Redis) -> None:
    batch = build_batch(case.data)
    check_batch(case.data, batch)
    exchanges = Exchanges(client)
    matcher = Matcher(counts={"events": len(batch["events"])})
    request = {"method": "POST", "path": "/api/v1/events", "auth": "agent", "json": batch}
    for expected in (case.data["answer"], case.data["resend_answer"]):
        response = exchanges.send(request)
        assert response.status_code == 200, response.content
        matcher.check(expected, response.json(), "$")
