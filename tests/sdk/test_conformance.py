"""sdk/conformance/: every breaker case against the Python SDK's run, worker and fleet scope, and
every events case's batch as the ControlPlane builds it. The control plane's side of the protocol
cases is tests/fleet/test_conformance_protocol.py.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.conformance_runner import (
    ROOT,
    SCHEMA,
    Case,
    CaseError,
    Matcher,
    build_batch,
    case_files,
    cases,
    check_batch,
    kind_of,
    load,
    play_breaker_case,
)

BREAKER_CASES = cases("breaker/")
EVENT_CASES = cases("protocol/events.json")


@pytest.mark.parametrize("case", BREAKER_CASES, ids=lambda case: case.id)
def test_breaker_case(case: Case) -> None:
    ran = play_breaker_case(case.data)
    assert ran, case.data["description"]


@pytest.mark.parametrize("case", EVENT_CASES, ids=lambda case: case.id)
def test_the_sdk_sends_the_batch_of_an_events_case(case: Case) -> None:
    check_batch(case.data, build_batch(case.data))


def test_every_file_is_held_to_its_schema_and_run_by_a_test() -> None:
    files = case_files()
    assert {kind_of(name) for name in files} == {"breakerFile", "eventsFile", "exchangesFile"}
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    for name in files:
        load(name)  # raises on a key the schema does not know
    played = {case.file for case in BREAKER_CASES + EVENT_CASES}
    protocol = {"protocol/ingest.json", "protocol/fleet.json"}  # tests/fleet runs these
    assert played | protocol == set(files)


def test_a_case_the_runner_cannot_interpret_fails() -> None:
    unknown_action = {
        "description": "x",
        "scope": "run",
        "tools": [],
        "steps": [{"do": "teleport"}],
    }
    with pytest.raises(CaseError, match="unknown action"):
        play_breaker_case(unknown_action)
    wrong_run = {
        "description": "x",
        "scope": "run",
        "tools": [],
        "steps": [{"expect": {"removed": []}, "run": "r9"}],
    }
    with pytest.raises(CaseError, match="one run"):
        play_breaker_case(wrong_run)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(
            {"$ref": "#/$defs/breakerFile", "$defs": SCHEMA["$defs"]}
        ).validate([{**unknown_action, "steps": [{"expect": {"colour": "red"}}]}])


def test_a_wrong_expectation_fails_the_case() -> None:
    case = json.loads((ROOT / "breaker" / "consecutive_failures.json").read_text())[0]
    case["steps"][1]["expect"]["consecutive"] = {"web_search": 3}
    with pytest.raises(CaseError, match="expected"):
        play_breaker_case(case)


def test_the_matcher_binds_runs_and_tells_booleans_from_numbers() -> None:
    matcher = Matcher()
    matcher.check({"run_id": {"$run": "r1"}}, {"run_id": "run-a"})
    with pytest.raises(CaseError):
        matcher.check({"run_id": {"$run": "r1"}}, {"run_id": "run-b"})
    with pytest.raises(CaseError):
        matcher.check({"run_id": {"$run": "r2"}}, {"run_id": "run-a"})
    with pytest.raises(CaseError):
        Matcher().check({"degraded": False}, {"degraded": 0})
    Matcher().check({"run_id": {"$absent": True}}, {"run_id": None})
    with pytest.raises(CaseError):
        Matcher().check_unordered([{"a": 1}, {"a": 1}], [{"a": 1}, {"a": 2}], "$")
