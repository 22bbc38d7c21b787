"""POST /api/v1/events: what is kept, what is refused and why, and that a resend changes nothing."""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from runs.models import (
    AgentToken,
    IngestedEvent,
    ModelCall,
    ReportedTransition,
    Run,
    ToolCall,
    Worker,
)
from runs.schemas import ELLIPSIS, MAX_TEXT_CHARS
from tests.ingest.support import EVENTS_URL, PostBatch, event, iso

ROW_MODELS = (Worker, Run, ModelCall, ToolCall, ReportedTransition, IngestedEvent)


def ledger_event_ids() -> set[str]:
    """The event ids in the dedupe ledger (its keys are scoped by worker: "<pk>:<id>")."""
    return {
        key.partition(":")[2] for key in IngestedEvent.objects.values_list("event_id", flat=True)
    }


def row_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in ROW_MODELS}


def snapshot() -> list[Any]:
    """Everything ingest can change, in a comparable form."""
    return [
        list(model.objects.order_by("pk").values()) for model in ROW_MODELS if model is not Worker
    ] + [list(Worker.objects.order_by("pk").values("pk", "worker_id", "first_seen_at"))]


def scripted_run(run_id: str = "r-1") -> list[dict[str, Any]]:
    return [
        event("run.started", run_id=run_id, ts=iso(0)),
        event("model.call", run_id=run_id, step=1, ts=iso(2)),
        event("tool.call", run_id=run_id, step=1, ts=iso(3)),
        event("breaker.transition", run_id=run_id, ts=iso(4)),
        event(
            "tool.call", run_id=run_id, step=2, outcome="success", attempts=1, error="", ts=iso(5)
        ),
        event("model.call", run_id=run_id, step=2, cost_usd=0.5, input_tokens=100, ts=iso(6)),
        event("run.finished", run_id=run_id, steps=2, degraded=True, ts=iso(9.5)),
    ]


@pytest.mark.django_db
def test_a_valid_batch_writes_each_event_once(post_batch: PostBatch, writer: str) -> None:
    response = post_batch({"worker_id": "w-1", "events": scripted_run()})

    assert response.status_code == 200
    body = response.json()
    assert (body["accepted"], body["duplicates"], body["rejected"]) == (7, 0, [])
    assert set(body["fleet"]) == {"version", "tools"}
    run = Run.objects.get(run_id="r-1")
    assert run.worker.worker_id == "w-1"
    assert (run.agent, run.step_budget, run.status, run.degraded, run.steps) == (
        "research", 20, "completed", True, 2,
    )  # fmt: skip
    assert run.duration_ms == 9500
    assert (run.model_calls, run.input_tokens, run.output_tokens) == (2, 5300, 620)
    assert run.model_spend_usd == Decimal("0.561")
    assert (run.tool_calls, run.tool_attempts, run.tool_failures) == (2, 6, 1)
    assert ToolCall.objects.filter(run=run).count() == 2
    assert ModelCall.objects.filter(run=run).count() == 2
    transition = ReportedTransition.objects.get()
    assert (transition.scope, transition.tool, transition.state) == ("run", "web_search", "open")
    assert IngestedEvent.objects.count() == 7


@pytest.mark.django_db
def test_events_of_a_run_may_come_before_its_start_in_the_same_batch(
    post_batch: PostBatch,
    writer: str,
) -> None:
    events = scripted_run()
    response = post_batch({"worker_id": "w-1", "events": events[::-1]})

    assert response.json()["accepted"] == 7
    assert Run.objects.get().tool_calls == 2


@pytest.mark.django_db
def test_totals_add_up_across_batches(post_batch: PostBatch, writer: str) -> None:
    events = scripted_run()
    for start in range(0, len(events), 2):
        assert post_batch({"worker_id": "w-1", "events": events[start : start + 2]}).json()[
            "accepted"
        ] == len(events[start : start + 2])

    run = Run.objects.get()
    assert (run.model_calls, run.tool_calls, run.tool_failures, run.status) == (
        2, 2, 1, "completed",
    )  # fmt: skip
    assert run.model_spend_usd == Decimal("0.561")


@pytest.mark.django_db
def test_resending_a_batch_ten_times_changes_nothing_after_the_first(
    post_batch: PostBatch,
    writer: str,
) -> None:
    batch = {"worker_id": "w-1", "events": scripted_run()}
    assert post_batch(batch).json()["accepted"] == 7
    after_first = snapshot()

    for _ in range(10):
        body = post_batch(batch).json()
        assert (body["accepted"], body["duplicates"], body["rejected"]) == (0, 7, [])

    assert snapshot() == after_first


@pytest.mark.django_db
def test_a_partly_new_batch_applies_only_the_new_events(post_batch: PostBatch, writer: str) -> None:
    events = scripted_run()
    post_batch({"worker_id": "w-1", "events": events[:4]})

    body = post_batch({"worker_id": "w-1", "events": events}).json()

    assert (body["accepted"], body["duplicates"]) == (3, 4)
    run = Run.objects.get()
    assert (run.tool_calls, run.model_calls) == (2, 2)


@pytest.mark.django_db
def test_valid_events_are_kept_next_to_rejected_ones(post_batch: PostBatch, writer: str) -> None:
    events = [
        event("run.started"),
        event("tool.call", outcome="maybe"),
        event("model.call"),
        event("tool.call", run_id="r-unknown"),
    ]

    body = post_batch({"worker_id": "w-1", "events": events}).json()

    assert body["accepted"] == 2
    assert [(r["index"], r["id"]) for r in body["rejected"]] == [
        (1, events[1]["id"]),
        (3, events[3]["id"]),
    ]
    assert "outcome" in body["rejected"][0]["reason"]
    assert "unknown run_id 'r-unknown'" in body["rejected"][1]["reason"]
    assert ledger_event_ids() == {
        events[0]["id"],
        events[2]["id"],
    }
    assert ToolCall.objects.count() == 0


def _with_run(*extra: Any) -> dict[str, Any]:
    return {"worker_id": "w-1", "events": [event("run.started"), *extra]}


# Each case: a batch (or raw body), then the reason expected for event index 1 (the first event
# starts the run and is valid) -- or, for bodies that are not a batch, the status and detail.
REJECTED_EVENTS: dict[str, tuple[dict[str, Any], str]] = {
    "wrong type": (
        _with_run(event("model.call", input_tokens="5200")),
        "input_tokens: Input should be a valid integer",
    ),
    "bool as int": (
        _with_run(event("model.call", output_tokens=True)),
        "output_tokens: Input should be a valid integer",
    ),
    "unknown event type": (
        _with_run(event("tool.called")),
        "unknown event type 'tool.called'; expected one of run.started",
    ),
    "missing type": (_with_run({"id": "x-1", "ts": iso()}), "missing field 'type'"),
    "missing field": (
        _with_run({k: v for k, v in event("tool.call").items() if k != "outcome"}),
        "outcome: Field required",
    ),
    "missing id": (
        _with_run({k: v for k, v in event("tool.call").items() if k != "id"}),
        "id: Field required",
    ),
    "negative cost": (
        _with_run(event("model.call", cost_usd=-0.5)),
        "cost_usd: Input should be greater than or equal to 0",
    ),
    "unknown outcome": (
        _with_run(event("tool.call", outcome="flaky")),
        "outcome: Input should be 'success', 'retryable', 'semantic', 'degraded' or 'blocked'",
    ),
    "naive timestamp": (
        _with_run(event("tool.call", ts="2026-11-29T09:12:04")),
        "ts: Input should have timezone info",
    ),
    "not a timestamp": (
        _with_run(event("tool.call", ts="yesterday")),
        "ts: Input should be a valid datetime",
    ),
    "too long tool name": (
        _with_run(event("tool.call", tool="t" * 201)),
        "tool: String should have at most 200 characters",
    ),
    "too long id": (
        _with_run(event("tool.call", id="i" * 201)),
        "id: String should have at most 200 characters",
    ),
    "control char in name": (
        _with_run(event("tool.call", tool="web\x00search")),
        "tool: must not contain control characters",
    ),
    "lone surrogate in name": (
        _with_run(event("tool.call", tool="web\ud800")),
        "tool: must be valid Unicode text",
    ),
    "event not an object": (_with_run(["tool.call"]), "an event must be a JSON object"),
    "duplicate id in batch": (
        _with_run(event("model.call", id="dup-1"), event("model.call", id="dup-1")),
        "duplicate id in this batch (first used at index 1)",
    ),
    "unknown run on run.finished": (
        _with_run(event("run.finished", run_id="r-404")),
        "unknown run_id 'r-404'",
    ),
    "fleet transition without a run": (
        _with_run(event("breaker.transition", scope="fleet", run_id=None)),
        "run_id is required when scope is 'fleet'",
    ),
    "fleet state change reported by an agent": (
        _with_run(event("breaker.transition", scope="fleet", state="closed")),
        "a fleet-scope report can only say that a run lost the tool (open)",
    ),
    "unknown scope": (
        _with_run(event("breaker.transition", scope="galaxy")),
        "scope: Input should be 'run', 'worker' or 'fleet'",
    ),
    "forced state reported": (
        _with_run(event("breaker.transition", state="forced_open")),
        "state: Input should be 'closed', 'open' or 'half_open'",
    ),
    "run scope without run": (
        _with_run(event("breaker.transition", run_id=None)),
        "run_id is required when scope is 'run'",
    ),
    "finished status running": (
        _with_run(event("run.finished", status="running")),
        "status: Input should be 'completed', 'failed' or 'cancelled'",
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", REJECTED_EVENTS, ids=list(REJECTED_EVENTS))
def test_a_bad_event_is_rejected_with_a_reason_and_leaves_nothing(
    post_batch: PostBatch, case: str
) -> None:
    batch, reason = REJECTED_EVENTS[case]
    events = batch["events"]

    response = post_batch(batch)

    assert response.status_code == 200
    body = response.json()
    assert [r["index"] for r in body["rejected"]] == [len(events) - 1]
    assert reason in body["rejected"][0]["reason"], body["rejected"]
    assert body["accepted"] == len(events) - 1
    # Only the valid events left rows: the run, and for the duplicate case the first model call.
    kept_ids = {e["id"] for e in events[:-1] if isinstance(e, dict)}
    assert ledger_event_ids() == kept_ids
    assert ToolCall.objects.count() == 0
    assert ReportedTransition.objects.count() == 0
    assert Run.objects.get().status == "running"


REFUSED_BODIES: dict[str, tuple[bytes, int, str]] = {
    "malformed JSON": (b'{"worker_id": "w-1", "events": [', 400, "body is not valid JSON"),
    "not UTF-8": ('{"worker_id": "w-ü", "events": []}'.encode("latin-1"), 400, "body is not UTF-8"),
    "NaN": (
        b'{"worker_id": "w-1", "events": [{"id": "a", "cost_usd": NaN}]}',
        400,
        "NaN is not valid JSON",
    ),
    "empty body": (b"", 400, "empty body"),
    "a list": (b"[]", 400, "body must be a JSON object"),
    "no events": (b'{"worker_id": "w-1"}', 400, "'events' must be a JSON array"),
    "events not a list": (
        b'{"worker_id": "w-1", "events": {}}',
        400,
        "'events' must be a JSON array",
    ),
    "no worker": (b'{"events": []}', 400, "'worker_id' must be a string"),
    "worker not a string": (b'{"worker_id": 7, "events": []}', 400, "'worker_id' must be a string"),
    "control char in worker": (
        b'{"worker_id": "w\\u0000", "events": []}',
        400,
        "'worker_id' must not contain control characters",
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", REFUSED_BODIES, ids=list(REFUSED_BODIES))
def test_a_body_that_is_not_a_batch_is_refused_whole(post_batch: PostBatch, case: str) -> None:
    raw, status, detail = REFUSED_BODIES[case]

    response = post_batch(raw)

    assert response.status_code == status
    assert detail in response.json()["detail"]
    assert all(count == 0 for count in row_counts().values())


@pytest.mark.django_db
def test_an_oversized_body_is_refused_from_its_content_length(
    post_batch: PostBatch, settings: SettingsWrapper
) -> None:
    settings.INGEST_MAX_BODY_BYTES = 1000
    batch = {"worker_id": "w-1", "events": scripted_run()}
    raw = json.dumps(batch).encode()
    assert len(raw) > 1000

    response = post_batch(raw)

    assert response.status_code == 413
    assert "body larger than 1000 bytes" in response.json()["detail"]
    assert all(count == 0 for count in row_counts().values())


@pytest.mark.django_db
def test_a_body_is_read_only_up_to_its_declared_length(post_batch: PostBatch) -> None:
    raw = json.dumps({"worker_id": "w-1", "events": scripted_run()}).encode()

    # A client that declares less than it sends gets what it declared read: here, broken JSON.
    response = post_batch(raw, CONTENT_LENGTH="10")

    assert response.status_code == 400
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_too_many_events_in_one_batch_get_413(
    post_batch: PostBatch, settings: SettingsWrapper
) -> None:
    settings.INGEST_MAX_EVENTS = 5

    response = post_batch({"worker_id": "w-1", "events": scripted_run()})

    assert response.status_code == 413
    assert "7 events in one batch; the limit is 5" in response.json()["detail"]
    assert all(count == 0 for count in row_counts().values())


@pytest.mark.django_db
def test_a_long_error_text_is_cut_with_an_ellipsis_not_refused(post_batch: PostBatch) -> None:
    long_error = "E" * 5000
    batch = _with_run(
        event("tool.call", error=long_error), event("breaker.transition", reason="R" * 3000)
    )

    body = post_batch(batch).json()

    assert (body["accepted"], body["rejected"]) == (3, [])
    error = ToolCall.objects.get().error
    assert len(error) == MAX_TEXT_CHARS
    assert error.endswith(ELLIPSIS)
    assert error.startswith("E" * 1000)
    assert len(ReportedTransition.objects.get().reason) == MAX_TEXT_CHARS


@pytest.mark.django_db
def test_control_characters_in_error_texts_are_made_storable(post_batch: PostBatch) -> None:
    batch = _with_run(event("tool.call", error="bad\x00byte and \ud83d half a pair"))

    assert post_batch(batch).json()["accepted"] == 2

    error = ToolCall.objects.get().error
    assert "\x00" not in error
    assert error.startswith("bad\ufffdbyte")


@pytest.mark.django_db
def test_a_rejected_event_can_be_fixed_and_sent_again_with_the_same_id(
    post_batch: PostBatch,
) -> None:
    bad = event("model.call", input_tokens="5")
    post_batch(_with_run(bad))

    fixed = bad | {"input_tokens": 5}
    body = post_batch({"worker_id": "w-1", "events": [fixed]}).json()

    assert (body["accepted"], body["duplicates"]) == (1, 0)
    assert ModelCall.objects.get().input_tokens == 5


@pytest.mark.django_db
def test_a_run_cannot_be_started_twice(post_batch: PostBatch) -> None:
    post_batch(_with_run())

    body = post_batch({"worker_id": "w-1", "events": [event("run.started")]}).json()

    assert body["accepted"] == 0
    assert "run 'r-1' was already started" in body["rejected"][0]["reason"]
    assert Run.objects.count() == 1


@pytest.mark.django_db
def test_a_run_cannot_be_finished_twice(post_batch: PostBatch, writer: str) -> None:
    post_batch(_with_run(event("run.finished", status="failed")))

    body = post_batch({"worker_id": "w-1", "events": [event("run.finished")]}).json()

    assert "run 'r-1' has already finished" in body["rejected"][0]["reason"]
    assert Run.objects.get().status == "failed"


@pytest.mark.django_db
def test_events_for_a_run_of_another_worker_are_rejected(
    post_batch: PostBatch, writer: str
) -> None:
    post_batch(_with_run())

    body = post_batch({"worker_id": "w-2", "events": [event("tool.call")]}).json()

    assert body["accepted"] == 0
    assert "unknown run_id 'r-1' for this worker" in body["rejected"][0]["reason"]
    assert Run.objects.get().tool_calls == 0


@pytest.mark.django_db
def test_a_worker_scope_transition_needs_no_run(post_batch: PostBatch, writer: str) -> None:
    transition = event("breaker.transition", scope="worker", run_id=None, state="half_open")

    body = post_batch({"worker_id": "w-1", "events": [transition]}).json()

    assert body["accepted"] == 1
    row = ReportedTransition.objects.get()
    assert (row.run, row.scope, row.state, row.worker.worker_id) == (
        None,
        "worker",
        "half_open",
        "w-1",
    )


@pytest.mark.django_db
def test_each_batch_updates_its_workers_last_seen_time(post_batch: PostBatch) -> None:
    post_batch({"worker_id": "w-1", "events": []})
    worker = Worker.objects.get()
    Worker.objects.filter(pk=worker.pk).update(
        last_seen_at=worker.last_seen_at - timedelta(hours=1)
    )

    post_batch({"worker_id": "w-1", "events": []})

    worker.refresh_from_db()
    assert timezone.now() - worker.last_seen_at < timedelta(minutes=1)
    assert worker.first_seen_at < worker.last_seen_at


@pytest.mark.django_db
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer ", "Bearer bp_not-a-real-token", "Token something", "Bearer " + "x" * 500],
    ids=["missing", "empty", "unknown", "wrong scheme", "absurdly long"],
)
def test_a_missing_or_unknown_token_gets_401(client: Client, authorization: str | None) -> None:
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = client.post(
        EVENTS_URL,
        data=json.dumps(_with_run()),
        content_type="application/json",
        **headers,  # type: ignore[arg-type]
    )

    assert response.status_code == 401
    assert all(count == 0 for count in row_counts().values())


@pytest.mark.django_db
def test_a_revoked_token_gets_401(post_batch: PostBatch, agent_token: str) -> None:
    assert post_batch({"worker_id": "w-1", "events": []}).status_code == 200
    AgentToken.objects.update(revoked_at=timezone.now())

    assert post_batch(_with_run()).status_code == 401
    assert Run.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_locked_database_gets_503_with_retry_after_and_nothing_is_half_written(
    post_batch: PostBatch, settings: SettingsWrapper
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("lock timeouts are a PostgreSQL feature")
    settings.INGEST_LOCK_TIMEOUT_MS = 200
    post_batch(_with_run())  # the run and its worker exist
    before = snapshot()
    db = connection.settings_dict
    other = psycopg.connect(
        host=db["HOST"] or None, port=db["PORT"] or None, user=db["USER"],
        password=db["PASSWORD"] or None, dbname=db["NAME"], connect_timeout=5,
    )  # fmt: skip
    try:
        # Another transaction holds the run's row: finishing it has to wait for that lock.
        other.execute("SELECT 1 FROM runs_run WHERE run_id = 'r-1' FOR UPDATE")
        response = post_batch(
            {"worker_id": "w-1", "events": [event("tool.call"), event("run.finished")]}
        )
    finally:
        other.rollback()
        other.close()

    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0
    assert "nothing was written" in response.json()["detail"]
    assert snapshot() == before


@pytest.mark.django_db
def test_the_openapi_schema_and_docs_are_served(admin_client: Client) -> None:
    schema = admin_client.get("/api/v1/openapi.json")
    docs = admin_client.get("/api/v1/docs")

    assert schema.status_code == 200
    operation = schema.json()["paths"]["/api/v1/events"]["post"]
    body_schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body_schema["required"] == ["worker_id", "events"]
    assert "$defs" not in json.dumps(body_schema)
    assert {"200", "400", "401", "413", "503"} <= set(operation["responses"])
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()


@pytest.mark.django_db
def test_a_drop_report_is_counted_once_however_often_it_is_resent(
    post_batch: PostBatch, writer: str
) -> None:
    batch = {"worker_id": "w-1", "events": [], "dropped": {"id": "drop-1", "count": 12}}

    for _ in range(3):
        assert post_batch(batch).status_code == 200
    post_batch(batch | {"dropped": {"id": "drop-2", "count": 3}})

    assert Worker.objects.get().dropped_events == 15


@pytest.mark.django_db
def test_a_malformed_drop_report_refuses_the_batch(post_batch: PostBatch) -> None:
    response = post_batch({"worker_id": "w-1", "events": [], "dropped": {"id": "d", "count": -1}})

    assert response.status_code == 400
    assert "'dropped' is not valid: count" in response.json()["detail"]
    assert Worker.objects.count() == 0


def test_the_same_batch_sent_in_parallel_is_applied_once(
    live_server: Any, transactional_db: None, agent_token: str
) -> None:
    batch = json.dumps({"worker_id": "w-1", "events": scripted_run()}).encode()

    def send(_: int) -> dict[str, Any]:
        request = urllib.request.Request(
            live_server.url + EVENTS_URL,
            data=batch,
            headers={"Authorization": f"Bearer {agent_token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return dict(json.loads(response.read()))

    with ThreadPoolExecutor(max_workers=4) as pool:
        replies = list(pool.map(send, range(4)))

    assert sum(r["accepted"] for r in replies) == 7
    assert sum(r["duplicates"] for r in replies) == 21
    assert IngestedEvent.objects.count() == 7
    assert Run.objects.get().tool_calls == 2
