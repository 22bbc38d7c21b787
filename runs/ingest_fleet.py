"""Ingest's fleet section: the fleet updater the project names (``INGEST_FLEET_UPDATER``) and the
three points where a batch meets it: before it writes, after it commits, and in its reply."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from runs.fleet_interface import AcceptedModelCall, AcceptedToolCall, FleetUpdater
from runs.models import AgentToken, FleetBacklog

__all__ = (
    "apply_fleet_outcomes",
    "backlog_item",
    "fleet_identity",
    "fleet_lease_holder",
    "fleet_ready",
    "fleet_state_for_reply",
    "fleet_updater",
    "from_backlog",
    "updater_factory",
)

logger = logging.getLogger(__name__)

_current: FleetUpdater | None = None


def fleet_updater() -> FleetUpdater:
    """The updater ``settings.INGEST_FLEET_UPDATER`` builds, built once (again after the setting
    changes): ingest asks for it several times a batch."""
    global _current
    updater = _current
    if updater is None:
        updater = _current = _build_updater(getattr(settings, "INGEST_FLEET_UPDATER", None))
    return updater


def _build_updater(path: object) -> FleetUpdater:
    updater: FleetUpdater = updater_factory(path)()
    return updater


def updater_factory(path: object) -> Callable[[], FleetUpdater]:
    """The callable ``INGEST_FLEET_UPDATER`` names, or ``ImproperlyConfigured`` saying why not."""
    if not isinstance(path, str) or not path:
        raise ImproperlyConfigured(
            "INGEST_FLEET_UPDATER must name the callable that builds ingest's fleet updater "
            "(e.g. 'runs.fleet_interface.NoFleet' for ingest without a fleet)"
        )
    try:
        factory = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"INGEST_FLEET_UPDATER {path!r} cannot be imported: {exc}"
        ) from exc
    if not callable(factory):
        raise ImproperlyConfigured(f"INGEST_FLEET_UPDATER {path!r} is not callable")
    return cast(Callable[[], FleetUpdater], factory)


def _forget_updater(*, setting: str, **_kwargs: object) -> None:
    global _current
    if setting == "INGEST_FLEET_UPDATER":
        _current = None


setting_changed.connect(_forget_updater, dispatch_uid="runs.ingest_fleet.updater")


def fleet_ready() -> None:
    """Raise (the API answers 503, nothing written) while the fleet store is unreachable, so
    that a batch with tool calls is not committed without reaching it."""
    fleet_updater().ready()


def apply_fleet_outcomes(
    *, tool_calls: Sequence[AcceptedToolCall], model_calls: Sequence[AcceptedModelCall] = ()
) -> None:
    """Hand the batch's new ``tool.call`` (and ``model.call``) events to the fleet after the
    ingest transaction committed, so the fleet never holds an event whose rows were rolled back.

    If the fleet store fails now, the rows stay committed and the tool calls wait in the
    ``FleetBacklog`` table; Celery's fleet tick applies them when the store answers again (the
    store recognises event ids it has already counted, so a partial apply is not counted twice).
    The spend rule is not backlogged: it only ever opens a tool earlier than the consecutive
    rule, which the backlog keeps whole (docs/adr/0201-spend-rule-off-by-default.md).
    """
    if not tool_calls and not model_calls:
        return
    fleet = fleet_updater()
    if tool_calls:
        try:
            fleet.record_tool_calls(tool_calls)
        except fleet.store_errors:
            logger.warning("fleet store failed after commit; %d tool calls wait", len(tool_calls))
            FleetBacklog.objects.create(calls=[backlog_item(call) for call in tool_calls])
            return
    try:
        fleet.record_spend(tool_calls, model_calls)
    except fleet.store_errors:
        logger.warning(
            "fleet store failed after commit; the spend rule misses %d model calls",
            len(model_calls),
        )


def backlog_item(call: AcceptedToolCall) -> dict[str, Any]:
    return {**asdict(call), "ts": call.ts.isoformat()}


def from_backlog(item: dict[str, Any]) -> AcceptedToolCall:
    return AcceptedToolCall(**{**item, "ts": datetime.fromisoformat(item["ts"])})


def fleet_state_for_reply() -> dict[str, Any]:
    """The fleet state every ingest reply carries, in the shape of ``GET /api/v1/fleet``:
    ``{"version": int, "tools": {name: {"state", "since", "reason", "forced"}}}``. After a commit
    the reply must not fail: without Redis it is the state the database mirrors."""
    fleet = fleet_updater()
    try:
        return fleet.state()
    except fleet.store_errors:
        return fleet.state_from_database()


def fleet_identity(*, worker_id: str, token: AgentToken | None) -> str:
    """Who an outcome (or a trial lease) counts for in the fleet's quorum.

    By default (``FLEET_QUORUM = "tokens"``) each token is one voter, so a token cannot make up
    workers: a token bound to a worker counts as that worker (its id, readable on the pages;
    ingest has checked it is the one named), any other token as ``token:<pk>`` whatever worker
    ids it sends. With the opt-in ``"workers"`` every worker id counts
    (docs/adr/0176-quorum-counts-tokens-by-default.md).
    """
    if token is None or settings.FLEET_QUORUM == "workers":
        return worker_id
    if token.worker_id:
        return token.worker_id
    return f"token:{token.pk}"


def fleet_lease_holder(*, worker_id: str, token: AgentToken | None) -> str:
    """Who holds a fleet trial lease (and whose trial call decides): the worker, not the voter.

    A bound token is its worker; an unbound token is one voter however many workers share it,
    but each of them is its own holder (``token:<pk>/<worker id>``), so exactly one of them makes
    the trial call (docs/adr/0189-trial-lease-holder-is-the-worker.md). With
    ``FLEET_QUORUM = "workers"`` the worker id is both.
    """
    if token is None or token.worker_id or settings.FLEET_QUORUM == "workers":
        return fleet_identity(worker_id=worker_id, token=token)
    return f"token:{token.pk}/{worker_id}"
