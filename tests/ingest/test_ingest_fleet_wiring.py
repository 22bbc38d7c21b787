"""Ingest calls the fleet updater the project names (``INGEST_FLEET_UPDATER``), and no other."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import pytest
from django.core.exceptions import ImproperlyConfigured
from pytest_django.fixtures import Settings

from runs.checks import check_fleet_updater
from runs.fleet_interface import AcceptedModelCall, AcceptedToolCall
from runs.ingest_fleet import fleet_updater
from runs.models import AgentToken, FleetBacklog, ToolCall
from scripts.testing.processes import free_port

pytestmark = pytest.mark.django_db

PostBatch = Callable[..., Any]  # the ingest tests' ``post_batch`` fixture
_ids = itertools.count(1)


def run_started(run_id: str) -> dict[str, Any]:
    return {
        "id": f"wiring-rs-{next(_ids)}",
        "type": "run.started",
        "ts": "2026-11-29T09:12:04Z",
        "run_id": run_id,
        "agent": "research",
    }


def tool_call(run_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"wiring-tc-{next(_ids)}",
        "type": "tool.call",
        "ts": "2026-11-29T09:12:05Z",
        "run_id": run_id,
        "step": 1,
        "tool": "web_search",
        "outcome": "retryable",
        "attempts": 5,
        "error": "ToolFailure: 503 from vendor",
        **fields,
    }


def model_call(run_id: str) -> dict[str, Any]:
    return {
        "id": f"wiring-mc-{next(_ids)}",
        "type": "model.call",
        "ts": "2026-11-29T09:12:06Z",
        "run_id": run_id,
        "step": 1,
        "model": "gpt-test",
        "input_tokens": 10,
        "output_tokens": 2,
        "cost_usd": 0.01,
    }


class RecordingFleet:
    """A fleet updater that keeps what ingest hands it (named by the tests' setting)."""

    handed: ClassVar[list[AcceptedToolCall]] = []
    spend: ClassVar[list[tuple[list[AcceptedToolCall], list[AcceptedModelCall]]]] = []
    store_errors: tuple[type[Exception], ...] = ()

    def ready(self) -> None:
        return None

    def record_tool_calls(self, calls: Sequence[AcceptedToolCall]) -> None:
        RecordingFleet.handed.extend(calls)

    def record_spend(
        self, tool_calls: Sequence[AcceptedToolCall], model_calls: Sequence[AcceptedModelCall]
    ) -> None:
        RecordingFleet.spend.append((list(tool_calls), list(model_calls)))

    def state(self) -> dict[str, Any]:
        return {"version": 7, "tools": {}}

    def state_from_database(self) -> dict[str, Any]:
        raise AssertionError("the recording fleet's store never fails")


@pytest.fixture
def recording_fleet(settings: Settings) -> Iterator[list[AcceptedToolCall]]:
    settings.INGEST_FLEET_UPDATER = f"{__name__}.RecordingFleet"
    RecordingFleet.handed.clear()
    RecordingFleet.spend.clear()
    yield RecordingFleet.handed
    RecordingFleet.handed.clear()
    RecordingFleet.spend.clear()


def test_without_a_fleet_ingest_runs_alone(post_batch: PostBatch, settings: Settings) -> None:
    settings.INGEST_FLEET_UPDATER = "runs.fleet_interface.NoFleet"
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # no fleet store to reach
    events = [run_started("r-alone"), tool_call("r-alone")]

    response = post_batch({"worker_id": "w1", "events": events})

    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 2
    assert response.json()["fleet"] == {"version": 0, "tools": {}}
    assert ToolCall.objects.filter(run__run_id="r-alone").count() == 1
    assert not FleetBacklog.objects.exists()


def test_ingest_hands_the_named_updater_each_new_tool_call_and_marks_a_resend(
    post_batch: PostBatch, recording_fleet: list[AcceptedToolCall]
) -> None:
    events = [
        run_started("r-hand"),
        tool_call("r-hand", id="tc-hand", trial=True),
        model_call("r-hand"),
    ]
    # A token bound to w1: under the default token quorum the fleet hears of it as w1.
    _, token = AgentToken.issue(name="host-1", worker_id="w1")
    first = post_batch({"worker_id": "w1", "events": events}, token=token)
    again = post_batch({"worker_id": "w1", "events": events}, token=token)

    assert first.json()["fleet"] == {"version": 7, "tools": {}}
    assert again.json()["duplicates"] == 3
    # The resend's stored call goes again, marked: the fleet store counts each dedupe id once,
    # which counts a call whose first commit acknowledgement was lost (issue 23, finding 6).
    call, resent = recording_fleet
    assert (call.resent, resent.resent) == (False, True)
    assert resent.dedupe_id == call.dedupe_id
    assert (call.event_id, call.worker_id, call.run_id, call.tool) == (
        "tc-hand",
        "w1",
        "r-hand",
        "web_search",
    )
    assert (call.outcome, call.attempts, call.error, call.trial) == (
        "retryable",
        5,
        "ToolFailure: 503 from vendor",
        True,
    )
    assert call.dedupe_id.endswith(":tc-hand")  # the ledger key: unique across workers
    # The spend rule hears of the same calls and the run's model spend, keyed by run.
    (tools, models), (resent_tools, resent_models) = RecordingFleet.spend
    assert (tools, resent_tools) == ([call], [resent])
    assert [(m.voter, m.cost_usd, m.dedupe_id) for m in models] == [
        ("w1", 0.01, resent_models[0].dedupe_id)
    ]
    assert models[0].run_key == call.run_key and call.run_key.endswith(":r-hand")


@pytest.mark.parametrize(
    "path, said",
    [
        ("runs.no_such_module.Fleet", "cannot be imported"),
        ("runs.fleet_interface.NoSuchFleet", "cannot be imported"),
        ("", "must name the callable"),
        ("runs.ingest_fleet.logger", "is not callable"),
    ],
)
def test_an_updater_setting_that_names_nothing_usable_is_a_system_check_error(
    settings: Settings, path: str, said: str
) -> None:
    settings.INGEST_FLEET_UPDATER = path
    [error] = check_fleet_updater()
    assert error.id == "runs.E001"
    assert said in error.msg
    with pytest.raises(ImproperlyConfigured, match=said):
        fleet_updater()


def test_the_project_settings_pass_the_updater_check() -> None:
    assert check_fleet_updater() == []
