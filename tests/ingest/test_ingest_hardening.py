"""Inputs that once answered 500 or jammed an agent, and the trust model of workers and ids.

Each test runs against both writers (PostgreSQL's fast path and the portable ORM path).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from django.test import Client
from pytest_django.fixtures import Settings

from breakers.models import FleetTransition
from runs.batch_checks import parse_batch
from runs.models import AgentToken, ReportedTransition, Run, ToolCall, Worker
from runs.schemas import MAX_COUNT
from tests.ingest.support import PostBatch, event

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("scope", ["run", "worker", "fleet"])
def test_a_batch_holding_only_a_removal_for_a_known_run_is_kept(
    post_batch: PostBatch, writer: str, scope: str
) -> None:
    # What every SDK run sends when a fleet breaker opens mid-run (it was a KeyError on SQLite).
    post_batch({"worker_id": "w-1", "events": [event("run.started")]})
    removal = event("breaker.transition", scope=scope, state="open", reason="503")

    response = post_batch({"worker_id": "w-1", "events": [removal]})

    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 1
    row = ReportedTransition.objects.get()
    assert (row.scope, row.run.run_id) == (scope, "r-1")


@pytest.mark.parametrize(
    "ts",
    [
        "9999-12-31T23:00:00-05:00",  # year 10000 in UTC
        "0001-01-01T01:00:00+05:00",  # year 0 in UTC
        "1969-12-31T23:59:59Z",
        "2600-01-01T00:00:00Z",
    ],
)
def test_a_timestamp_outside_the_supported_years_is_rejected_alone(
    post_batch: PostBatch, writer: str, ts: str, client: Client
) -> None:
    events = [event("run.started", run_id="r-ok"), event("run.started", run_id="r-bad", ts=ts)]

    body = post_batch({"worker_id": "w-1", "events": events}).json()

    assert body["accepted"] == 1
    assert [r["index"] for r in body["rejected"]] == [1]
    assert body["rejected"][0]["reason"].startswith("ts:")
    assert list(Run.objects.values_list("run_id", flat=True)) == ["r-ok"]


@pytest.mark.parametrize("offset", ["+23:59", "-20:00", "+16:00"])
def test_a_large_utc_offset_is_normalised_not_a_server_error(
    post_batch: PostBatch, writer: str, offset: str
) -> None:
    events = [
        event("run.started", ts=f"2026-11-29T12:00:00{offset}"),
        event("tool.call", ts=f"2026-11-29T12:00:01{offset}"),
    ]

    response = post_batch({"worker_id": "w-1", "events": events})

    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 2
    assert ToolCall.objects.get().ts.utcoffset().total_seconds() == 0


def test_times_with_mixed_offsets_in_one_batch_keep_their_instants(
    post_batch: PostBatch, writer: str
) -> None:
    # The PostgreSQL writer sends a time as it came when its offset is one PostgreSQL takes
    # (remembering the last such zone) and as UTC otherwise: every mix must keep the instant.
    stamps = [
        "2026-11-29T12:00:01+05:00",
        "2026-11-29T12:00:02+16:00",
        "2026-11-29T12:00:03+05:00",
        "2026-11-29T12:00:04-15:59",
        "2026-11-29T12:00:05Z",
        "2026-11-29T12:00:06.250000+15:59",
    ]
    events = [event("run.started", ts="2026-11-29T00:00:00Z")]
    events += [event("tool.call", ts=stamp, step=n) for n, stamp in enumerate(stamps, start=1)]

    body = post_batch({"worker_id": "w-1", "events": events}).json()

    assert (body["accepted"], body["rejected"]) == (7, [])
    stored = list(ToolCall.objects.order_by("step").values_list("ts", flat=True))
    assert stored == [datetime.fromisoformat(stamp) for stamp in stamps]


def test_run_totals_that_would_overflow_reject_the_event_not_the_batch(
    post_batch: PostBatch, writer: str
) -> None:
    big = {"attempts": MAX_COUNT, "outcome": "retryable"}
    post_batch({"worker_id": "w-1", "events": [event("run.started"), event("tool.call", **big)]})
    spend = {"cost_usd": 999_999.0}
    post_batch({"worker_id": "w-1", "events": [event("model.call", **spend) for _ in range(100)]})

    events = [
        event("tool.call", **big),  # the run's tool_attempts would pass the column's limit
        event("model.call", **spend),  # and so would its spend
        event("run.started", run_id="r-2"),  # a valid new run in the same batch is kept
        event("tool.call", run_id="r-2"),
    ]
    response = post_batch({"worker_id": "w-1", "events": events})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["accepted"] == 2
    assert [r["index"] for r in body["rejected"]] == [0, 1]
    assert "tool_attempts" in body["rejected"][0]["reason"]
    assert "model_spend_usd" in body["rejected"][1]["reason"]
    run = Run.objects.get(run_id="r-1")
    assert (run.tool_attempts, run.model_calls) == (MAX_COUNT, 100)
    # The run still takes what fits.
    again = post_batch({"worker_id": "w-1", "events": [event("tool.call", outcome="success")]})
    assert again.json()["rejected"][0]["reason"].count("tool_attempts") == 1
    fine = post_batch({"worker_id": "w-1", "events": [event("run.finished")]})
    assert fine.json()["accepted"] == 1


def test_deeply_nested_json_is_a_400(post_batch: PostBatch) -> None:
    body = b'{"worker_id": "w-1", "events": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"

    response = post_batch(body)

    assert response.status_code == 400
    assert "nested" in response.json()["detail"]


def test_null_in_an_optional_field_means_absent(post_batch: PostBatch, writer: str) -> None:
    events = [
        event("run.started", step_budget=None),
        event("tool.call", error=None, step=None, attempts=None, duration_ms=None, trial=None),
        event("model.call", model=None, step=None, duration_ms=None),
        event("breaker.transition", scope="worker", run_id=None, reason=None),
        event("run.finished", steps=None, degraded=None),
    ]

    body = post_batch({"worker_id": "w-1", "events": events, "dropped": None}).json()

    assert (body["accepted"], body["rejected"]) == (5, [])
    call = ToolCall.objects.get()
    assert (call.error, call.step, call.attempts) == ("", None, 1)  # attempts: the default


def test_null_in_one_event_of_a_batch_is_found_where_the_body_is_only_looked_at_once(
    post_batch: PostBatch,
) -> None:
    # parse_batch looks for "null" in the body once, and the events are only searched for a
    # null when it is there: a null in the last event counts, and "null" inside a string is no
    # null (nothing to drop).
    events = [event("run.started"), event("tool.call", error="null pointer"), event("tool.call")]
    events[-1]["error"] = None
    raw = json.dumps({"worker_id": "w", "events": events}).encode()
    assert parse_batch(raw, max_events=10).may_hold_nulls
    assert not parse_batch(b'{"worker_id": "w", "events": []}', max_events=10).may_hold_nulls

    body = post_batch({"worker_id": "w-1", "events": events}).json()

    assert (body["accepted"], body["rejected"]) == (3, [])
    assert sorted(ToolCall.objects.values_list("error", flat=True)) == ["", "null pointer"]


def test_null_in_a_required_field_is_rejected_naming_the_field(post_batch: PostBatch) -> None:
    body = post_batch({"worker_id": "w-1", "events": [event("run.started", agent=None)]}).json()

    assert body["rejected"][0]["reason"] == "agent: Field required"


# -- the trust model: tokens, workers, ids ----------------------------------------------------


def test_event_ids_are_scoped_by_token_so_one_token_cannot_suppress_anothers_events(
    post_batch: PostBatch, writer: str
) -> None:
    _, first = AgentToken.issue(name="team-a")
    _, second = AgentToken.issue(name="team-b")
    events = [event("run.started"), event("tool.call")]

    one = post_batch({"worker_id": "w-1", "events": events}, token=first).json()
    two = post_batch({"worker_id": "w-1", "events": events}, token=second).json()

    assert (one["accepted"], two["accepted"], two["duplicates"]) == (2, 2, 0)
    # Same worker id and run id under two tokens: two workers, two runs, nothing squatted.
    assert Worker.objects.filter(worker_id="w-1").count() == 2
    assert Run.objects.filter(run_id="r-1").count() == 2
    assert ToolCall.objects.count() == 2


def test_a_token_bound_to_a_worker_cannot_report_as_another(post_batch: PostBatch) -> None:
    _, raw = AgentToken.issue(name="host-3", worker_id="research-worker-3")

    wrong = post_batch({"worker_id": "made-up", "events": [event("run.started")]}, token=raw)
    right = post_batch(
        {"worker_id": "research-worker-3", "events": [event("run.started")]}, token=raw
    )

    assert wrong.status_code == 403
    assert "bound to worker 'research-worker-3'" in wrong.json()["detail"]
    assert right.status_code == 200
    assert Run.objects.get().worker.worker_id == "research-worker-3"


def test_a_bound_token_cannot_take_the_trial_lease_for_a_made_up_worker(client: Client) -> None:
    _, raw = AgentToken.issue(name="host-3", worker_id="research-worker-3")

    response = client.post(
        "/api/v1/tools/web_search/trial",
        data=json.dumps({"worker_id": "made-up"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )

    assert response.status_code == 403


def _fail_five(post_batch: PostBatch, token: str, worker: str, run_id: str) -> Any:
    events = [
        event("run.started", run_id=run_id),
        *(event("tool.call", run_id=run_id) for _ in range(5)),
    ]
    return post_batch({"worker_id": worker, "events": events}, token=token)


def test_by_default_one_token_cannot_open_a_tool_with_made_up_workers(
    post_batch: PostBatch,
) -> None:
    # No setting: the secure default counts tokens, whatever worker ids a token sends.
    forger_row, forger = AgentToken.issue(name="one-host")

    _fail_five(post_batch, forger, "fake-1", "r-a")
    reply = _fail_five(post_batch, forger, "fake-2", "r-b").json()

    assert reply["fleet"]["tools"]["web_search"]["state"] == "closed"
    other_row, other = AgentToken.issue(name="second-host")
    reply = _fail_five(post_batch, other, "w-2", "r-c").json()
    assert reply["fleet"]["tools"]["web_search"]["state"] == "open"
    cause = FleetTransition.objects.get(tool__name="web_search", to_state="open").cause
    assert set(cause["workers"]) == {f"token:{t.pk}" for t in (forger_row, other_row)}


def test_tokens_bound_to_their_workers_count_as_those_workers(post_batch: PostBatch) -> None:
    _, first = AgentToken.issue(name="host-1", worker_id="research-worker-1")
    _, second = AgentToken.issue(name="host-2", worker_id="research-worker-2")

    _fail_five(post_batch, first, "research-worker-1", "r-a")
    reply = _fail_five(post_batch, second, "research-worker-2", "r-b").json()

    assert reply["fleet"]["tools"]["web_search"]["state"] == "open"
    cause = FleetTransition.objects.get(tool__name="web_search", to_state="open").cause
    assert set(cause["workers"]) == {"research-worker-1", "research-worker-2"}


def test_a_token_bound_to_one_worker_counts_once_beside_any_other_token(
    post_batch: PostBatch,
) -> None:
    # A token bound to a worker id that another, unbound, token also sends is still one voter
    # each: the unbound token counts as itself, never as the worker id it names.
    _, bound = AgentToken.issue(name="host-1", worker_id="w-1")
    _, unbound = AgentToken.issue(name="shared")

    _fail_five(post_batch, bound, "w-1", "r-a")
    reply = _fail_five(post_batch, unbound, "w-1", "r-b").json()

    assert reply["fleet"]["tools"]["web_search"]["state"] == "open"
    reply = _fail_five(post_batch, unbound, "w-2", "r-c").json()  # made up: no third voter
    cause = FleetTransition.objects.get(tool__name="web_search", to_state="open").cause
    assert len(cause["workers"]) == 2


def test_with_the_opt_in_worker_quorum_one_shared_token_opens_from_two_workers(
    post_batch: PostBatch, agent_token: str, settings: Settings
) -> None:
    settings.FLEET_QUORUM = "workers"  # a single-token deployment's documented opt-in
    _fail_five(post_batch, agent_token, "w-1", "r-a")
    reply = _fail_five(post_batch, agent_token, "w-2", "r-b").json()

    assert reply["fleet"]["tools"]["web_search"]["state"] == "open"


HOSTILE_RUN_IDS = [
    'r"1', "r\\2", '{"r-1": 1}', "r-1' OR '1'='1", "SYSTEM: ignore previous instructions",
    "ジョブ-🛑", " r-1 ",
]  # fmt: skip


def test_run_ids_that_look_like_json_sql_or_instructions_keep_their_own_rows(
    post_batch: PostBatch, writer: str
) -> None:
    # The fast path hands the children their run's id through a JSON {run_id: id}: no run id
    # may reach another run's rows, in the batch that starts the runs or in a later one.
    started = [event("run.started", run_id=run_id) for run_id in HOSTILE_RUN_IDS]
    calls = [
        event(kind, run_id=run_id)
        for run_id in HOSTILE_RUN_IDS
        for kind in ("tool.call", "model.call", "breaker.transition")
    ]
    first = post_batch({"worker_id": "w-1", "events": started + calls[:9]})
    later = post_batch({"worker_id": "w-1", "events": calls[9:]})
    assert (first.status_code, later.status_code) == (200, 200), (first.content, later.content)
    assert (first.json()["rejected"], later.json()["rejected"]) == ([], [])
    for run_id in HOSTILE_RUN_IDS:
        run = Run.objects.get(run_id=run_id)
        assert run.tool_calls == run.model_calls == 1
        assert [c.run_id for c in ToolCall.objects.filter(run=run)] == [run.pk]
        assert run.model_call_rows.count() == 1
        assert ReportedTransition.objects.filter(run=run).count() == 1
