"""The server's choices and ingest schemas are the SDK's vocabulary, not a second spelling."""

from __future__ import annotations

from typing import get_args

from breaker_panel import vocabulary
from breakers.models import AutoState
from runs import models, schemas


def test_model_choices_are_the_sdks_words() -> None:
    assert tuple(models.Outcome.values) == vocabulary.OUTCOMES
    assert tuple(models.BreakerState.values) == vocabulary.STATES
    assert tuple(models.Scope.values) == vocabulary.SCOPES
    assert tuple(AutoState.values) == vocabulary.AUTOMATIC_STATES
    assert set(models.RunStatus.values) == {"running", *vocabulary.FINISHED_STATUSES}


def test_ingest_schemas_accept_exactly_the_sdks_words() -> None:
    assert get_args(schemas.OutcomeName) == vocabulary.OUTCOMES
    assert get_args(schemas.ReportedScope) == vocabulary.SCOPES
    assert get_args(schemas.ReportedState) == vocabulary.AUTOMATIC_STATES
    assert get_args(schemas.FinishedStatus) == vocabulary.FINISHED_STATUSES
    assert get_args(schemas.FleetStateName) == vocabulary.STATES
