"""Ingest's first two steps, with no database: a body parsed into a batch (or refused whole),
then each event validated on its own with a reason a person can act on."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from runs.schemas import (
    EVENT_MODELS,
    EVENT_TYPES,
    MAX_ID_CHARS,
    MAX_TS,
    MIN_TS,
    BreakerTransitionEvent,
    DroppedReport,
    ModelCallEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallEvent,
    check_identifier,
)

__all__ = (
    "Batch",
    "BatchRefused",
    "DropReport",
    "Event",
    "Rejection",
    "parse_batch",
    "validate_events",
)

Event = RunStartedEvent | ModelCallEvent | ToolCallEvent | BreakerTransitionEvent | RunFinishedEvent

_MAX_REASONS = 5


class BatchRefused(Exception):
    """The body is not a batch at all (400) or is too big (413): nothing of it is applied."""

    def __init__(self, detail: str, *, status: int = 400) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


@dataclass(frozen=True, slots=True)
class Rejection:
    index: int
    event_id: str | None
    reason: str


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


@dataclass(frozen=True, slots=True)
class Batch:
    worker_id: str
    events: list[Any]
    dropped: DropReport | None = None
    # False when the body does not spell ``null`` anywhere, so no event holds a null to drop.
    may_hold_nulls: bool = True


@dataclass(frozen=True, slots=True)
class DropReport:
    """Events a client had to drop (its buffer was full): counted once per report id."""

    report_id: str
    count: int


def parse_batch(raw: bytes, *, max_events: int) -> Batch:
    """Decode the body into a ``Batch`` or refuse it as a whole."""
    if not raw:
        raise BatchRefused("empty body: send a JSON object with 'worker_id' and 'events'")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BatchRefused(f"body is not UTF-8 (byte {exc.start})") from None
    try:
        body = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise BatchRefused(f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BatchRefused("body is nested too deeply to be an event batch") from None
    if not isinstance(body, dict):
        raise BatchRefused("body must be a JSON object with 'worker_id' and 'events'")
    worker_id = body.get("worker_id")
    if not isinstance(worker_id, str) or not 1 <= len(worker_id) <= MAX_ID_CHARS:
        raise BatchRefused(f"'worker_id' must be a string of 1-{MAX_ID_CHARS} characters")
    try:
        check_identifier(worker_id)
    except ValueError as exc:
        raise BatchRefused(f"'worker_id' {exc}") from None
    events = body.get("events")
    if not isinstance(events, list):
        raise BatchRefused("'events' must be a JSON array")
    if len(events) > max_events:
        raise BatchRefused(
            f"{len(events)} events in one batch; the limit is {max_events}", status=413
        )
    return Batch(worker_id, events, _parse_dropped(body.get("dropped")), "null" in text)


def _parse_dropped(value: object) -> DropReport | None:
    if value is None:
        return None
    try:
        report = DroppedReport.model_validate(value)
    except ValidationError as exc:
        raise BatchRefused(f"'dropped' is not valid: {_describe(exc)}") from None
    return DropReport(report.id, report.count)


_FRIENDLY = {
    "string_pattern_mismatch": "must not contain control characters",
    "string_unicode": "must be valid Unicode text (no unpaired surrogates)",
}


_TS_OUT_OF_BOUNDS = f"must be between {MIN_TS:%Y-%m-%d} and {MAX_TS:%Y-%m-%d} (UTC)"


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False, include_input=False)[:_MAX_REASONS]:
        where = ".".join(str(part) for part in error["loc"]) or "event"
        if where == "ts" and error["type"] in ("less_than", "greater_than_equal"):
            message = _TS_OUT_OF_BOUNDS
        else:
            message = _FRIENDLY.get(error["type"], error["msg"])
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate_events(
    items: Sequence[Any], *, may_hold_nulls: bool = True
) -> tuple[list[tuple[int, Event]], list[Rejection]]:
    """Check each event on its own; a later event that repeats an id in the batch is rejected.

    ``may_hold_nulls=False`` says that no event holds a null (``parse_batch`` found no ``null``
    in the body), which spares a look for one in every event (it compares each value with None,
    a tenth of the batch's validation).
    """
    valid: list[tuple[int, Event]] = []
    rejected: list[Rejection] = []
    first_index: dict[str, int] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            rejected.append(Rejection(index, None, "an event must be a JSON object"))
            continue
        # Most serializers write null for an unset optional field: null means absent.
        if may_hold_nulls and None in item.values():
            item = {key: value for key, value in item.items() if value is not None}
        raw_id = item.get("id")
        echo_id = raw_id if isinstance(raw_id, str) and len(raw_id) <= MAX_ID_CHARS else None
        event_type = item.get("type")
        model = EVENT_MODELS.get(event_type) if isinstance(event_type, str) else None
        if model is None:
            reason = (
                "missing field 'type'"
                if event_type is None
                else f"unknown event type {_short(event_type)}; expected one of "
                + ", ".join(EVENT_TYPES)
            )
            rejected.append(Rejection(index, echo_id, reason))
            continue
        try:
            event: Event = model.model_validate(item)  # type: ignore[assignment]
        except ValidationError as exc:
            rejected.append(Rejection(index, echo_id, _describe(exc)))
            continue
        if (first := first_index.get(event.id)) is not None:
            reason = f"duplicate id in this batch (first used at index {first})"
            rejected.append(Rejection(index, event.id, reason))
            continue
        first_index[event.id] = index
        valid.append((index, event))
    return valid, rejected
