"""The ControlPlane client: run + worker + fleet scope in the agent process, reporting in the back.

    plane = ControlPlane(url, token=token, worker_id="w1")
    run = plane.start_run(agent="research", step_budget=20)
    tools = run.available(TOOLS); text = run.notice()
    run.record_success("web_search") / run.record_failure("web_search", ToolFailure(...))
    run.record_model_call(model=..., input_tokens=..., output_tokens=..., cost_usd=...)
    run.finish(status="completed")
    plane.close()                       # flushes what is buffered (interpreter exit does too)

Nothing on the agent's side waits on the network. ``available()``, ``notice()`` and every
``record_*()`` touch in-process state only: the breakers, and a bounded buffer that each
``record_*()`` appends one event to. A background thread sends the buffer as batches (when
``batch_size`` events are waiting or ``flush_interval`` has passed), retries with exponential
backoff and jitter, honours ``Retry-After`` on 429/503, and resends a failed batch with the same
event ids, so the control plane applies it exactly once whatever happened to the first try.
"Later" answers (no answer, 401, 408, 429, 503, anything with ``Retry-After``) are resent for as
long as it takes; a batch the server keeps failing with another 5xx is bisected down to the
event it cannot take, and only that event is dropped (once an empty batch shows the server is
up), so one bad event never blocks the rest. ``flush()`` and ``close()`` keep to their timeout.
A second thread long-polls ``GET /api/v1/fleet?wait=N`` with ``If-None-Match`` (the server
answers when the fleet changes; one request open per plane), and falls back to polling every
``fleet_poll_interval`` when the server does not hold the request; every ingest reply carries the
fleet state too. When the buffer is full, new events are dropped (the oldest are kept: they
include the ``run.started`` later events refer to), counted, and the count is reported with the
next batch that gets through.

The fleet half-open trial of a tool without a probe is one agent call under a lease. After
each poll, for every such tool, the poll thread asks ``POST /api/v1/tools/{tool}/trial`` (while
this worker has a run in progress, so an idle worker never sits on the fleet's only trial; a
refusal is asked again after ``trial_retry_interval``, an error on the next poll). On a grant,
the first run of this worker to ask that still has the tool keeps it in ``available()``: its
next reported call of the tool decides (success closes the fleet breaker, a retryable failure
re-opens it with a longer cooldown, a semantic one says nothing and the lease is asked for
again). Every other run has it removed, and the lease lapses unused after its ``expires_at``.

Event ids are a per-process random prefix (64 bits from ``os.urandom``, renewed after ``fork``)
plus a counter: unique across processes without a ``uuid4()`` per event.

Only the standard library is used, so an agent process needs nothing beyond ``breakers.sdk``.
"""

from __future__ import annotations

import atexit
import contextlib
import email.utils
import enum
import http.client
import itertools
import json
import logging
import os
import random
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

from breakers.sdk.classify import Classifier
from breakers.sdk.core import (
    Clock,
    FailureInfo,
    Outcome,
    Removal,
    Scope,
    State,
    ToolBreaker,
)
from breakers.sdk.vocabulary import FINISHED_STATUSES, SCOPES
from breakers.sdk.worker import (
    DEFAULT_COOLDOWN,
    DEFAULT_MAX_COOLDOWN,
    ExternalScope,
    RunBreakers,
    ScopeState,
    WorkerBreakers,
)

__all__ = ["ControlPlane", "Run", "SenderStats"]

logger = logging.getLogger("breakers.sdk.client")

# Matches the server's limit (docs/api.md): longer texts would be cut there anyway.
MAX_TEXT_CHARS = 2000
_RUN_STATUSES = frozenset(FINISHED_STATUSES)
# "Nothing was written, send it again later": resent with the same ids until the server
# takes them, however long that is (with Retry-After, any status means that).
_LATER_STATUSES = frozenset({0, 401, 408, 429, 503})
ALL_SCOPES: tuple[str, ...] = SCOPES
# A run breaker that never trips: how a plane without run scope still records per-run facts.
_NEVER = 2**62
# An HTTP Date header has whole seconds: count a lease as that much shorter than it says.
_DATE_RESOLUTION = 1.0
# Between two long-polls: a change meanwhile is answered at once by the next one, so this adds
# no latency; it only keeps a misbehaving server from spinning the poll thread.
_LONG_POLL_GAP = 0.01


# -- ids ----------------------------------------------------------------------------------------


class _Ids:
    """Process-unique ids: a random prefix and a counter (``next()`` on a count is atomic)."""

    def __init__(self) -> None:
        self._renew()

    def _renew(self) -> None:
        self.prefix = os.urandom(8).hex()
        self._counter = itertools.count(1)

    def new(self) -> str:
        return f"{self.prefix}-{next(self._counter):x}"


_ids = _Ids()
# A forked child would otherwise repeat its parent's ids.
os.register_at_fork(after_in_child=_ids._renew)


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


# What the agent thread buffers: (time.time(), event dict without id and ts) or, for a tool
# call, one flat _ToolCall tuple. The sender thread turns it into the event (_materialize);
# events taken back after a failed send are already events (dicts) and stay as they are.
_ToolCall = tuple[float, str, int, str, Outcome, int, "int | None", str, bool]
_Recorded = tuple[float, "dict[str, Any]"] | _ToolCall


def _materialize(item: _Recorded | dict[str, Any]) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    if len(item) == 2:
        timestamp, event = item
    else:
        timestamp, run_id, step, tool, outcome, attempts, duration_ms, error, trial = item
        event = {
            "type": "tool.call",
            "run_id": run_id,
            "step": step,
            "tool": tool,
            "outcome": str(outcome),
            "attempts": attempts,
            "duration_ms": duration_ms,
            "error": _clip(error),
        }
        if trial:
            # The control plane decides a half-open fleet breaker on this event only: a late
            # call of another run (or worker) must not close or re-open it.
            event["trial"] = True
    event["id"] = _ids.new()
    event["ts"] = _iso(timestamp)
    return event


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"


# -- the run handle ------------------------------------------------------------------------------


class Run:
    """One agent run: its own breakers combined with the worker's and the fleet's.

    A tool removed from this run by any scope stays removed for the rest of the run. ``step``
    counts model calls (the step of a tool call is that of the model call that asked for it)
    unless the caller passes ``step=`` explicitly.
    """

    def __init__(self, plane: ControlPlane, *, run_id: str, agent: str, step_budget: int | None):
        self.plane = plane
        self.run_id = run_id
        self.agent = agent
        self.step_budget = step_budget
        self.step = 0
        self.finished = False
        scopes = plane.scopes
        run_breaker = ToolBreaker(
            plane.threshold if Scope.RUN in scopes else _NEVER,
            step_budget=step_budget if Scope.RUN in scopes else None,
            clock=plane.worker.clock,
            on_transition=self._on_run_transition,
            classify=plane.worker.classify,
        )
        self.breakers: RunBreakers = RunBreakers(
            run_breaker,
            worker=plane.worker if Scope.WORKER in scopes else None,
            sources=(plane.fleet,) if Scope.FLEET in scopes else (),
            clock=plane.worker.clock,
            on_remove=self._on_removed,
        )
        plane._runs_in_progress.add(self)
        # The per-step hot path goes straight to the run's breakers (bench/bench_sdk.py).
        self.available = self.breakers.available  # type: ignore[method-assign]
        self._append = plane._append

    # -- the three-line wiring (same calls as ToolBreaker) --------------------------------

    def available[T](self, tools: Iterable[T]) -> list[T]:
        """The tools in the caller's shape, without those this run has lost (any scope)."""
        return self.breakers.available(tools)

    def notice(self) -> str | None:
        """None, or the text for the model naming each removed tool, its scope and last error."""
        return self.breakers.notice()

    def removals(self) -> Mapping[str, Removal]:
        return self.breakers.removals()

    def record_success(
        self,
        tool: str,
        *,
        duration_ms: int | None = None,
        attempts: int = 1,
        step: int | None = None,
    ) -> None:
        breakers = self.breakers
        # Before recording, which ends the trial; the usual case (no fleet trial) without a call.
        trial = False if not breakers._fleet_trials else breakers.holds_fleet_trial(tool)
        breakers.record_success(tool)
        # The per-call hot path (bench/bench_sdk.py): the event is a tuple built in one
        # expression; its JSON is built on the sender thread (_materialize).
        self._append(
            (
                time.time(),
                self.run_id,
                self.step if step is None else step,
                tool,
                Outcome.SUCCESS,
                attempts,
                duration_ms,
                "",
                trial,
            )
        )

    def record_failure(
        self,
        tool: str,
        failure: BaseException | str | None = None,
        *,
        duration_ms: int | None = None,
        step: int | None = None,
    ) -> FailureInfo:
        """Count an exhausted call, classified by the plane's ``classify`` (a ``ToolFailure``
        says retryable or semantic itself, and how many HTTP attempts it made)."""
        trial = self.breakers.holds_fleet_trial(tool)  # before recording: that ends the trial
        info = self.breakers.record_failure(tool, failure)
        self._tool_event(
            tool, info.outcome, info.attempts, duration_ms, info.error, step, trial=trial
        )
        return info

    def record_blocked(self, tool: str, *, step: int | None = None) -> None:
        """The model asked for a tool this run no longer offers; it was refused locally."""
        reason = self.removals().get(tool)
        error = f"blocked by the {reason.scope} breaker" if reason else "blocked"
        self._tool_event(tool, Outcome.BLOCKED, 0, 0, error, step)

    def record_model_call(
        self,
        *,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float,
        model: str = "",
        duration_ms: int | None = None,
        step: int | None = None,
    ) -> None:
        self.step += 1
        self.plane._emit(
            {
                "type": "model.call",
                "run_id": self.run_id,
                "step": self.step if step is None else step,
                "model": model,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cost_usd": cost_usd,
                "duration_ms": duration_ms,
            }
        )

    def finish(
        self, *, status: str = "completed", degraded: bool | None = None, steps: int | None = None
    ) -> None:
        """End the run. ``degraded`` defaults to whether the run lost any tool."""
        if self.finished:
            return
        if status not in _RUN_STATUSES:
            raise ValueError(f"status must be one of {sorted(_RUN_STATUSES)}, got {status!r}")
        self.finished = True
        lost_a_tool = bool(self.breakers.removals())
        self.breakers.close()
        self.plane._runs_in_progress.discard(self)
        self.plane._emit(
            {
                "type": "run.finished",
                "run_id": self.run_id,
                "status": status,
                "degraded": lost_a_tool if degraded is None else bool(degraded),
                "steps": self.step if steps is None else steps,
            }
        )

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.finish(status="completed" if exc_type is None else "failed")

    # -- internals -------------------------------------------------------------------------

    def _tool_event(
        self,
        tool: str,
        outcome: Outcome,
        attempts: int,
        duration_ms: int | None,
        error: str,
        step: int | None,
        *,
        trial: bool = False,
    ) -> None:
        step = self.step if step is None else step
        record = (
            time.time(),
            self.run_id,
            step,
            tool,
            outcome,
            attempts,
            duration_ms,
            error,
            trial,
        )
        self._append(record)

    def _on_removed(self, removal: Removal) -> None:
        # The run's own breaker reports its transition itself; a wider scope's removal is reported
        # as seen by this run, so its page can show when and by which scope it lost the tool.
        if removal.scope is not Scope.RUN:
            self.plane._emit_transition(
                removal.tool, removal.scope, State.OPEN, removal.reason, run_id=self.run_id
            )

    def _on_run_transition(
        self, tool: str, scope: Scope, old_state: State, new_state: State, reason: str, /
    ) -> None:
        self.plane._emit_transition(tool, scope, new_state, reason, run_id=self.run_id)


# -- statistics ----------------------------------------------------------------------------------


class SenderStats:
    """What the background sender has done; read it for monitoring or tests."""

    def __init__(self) -> None:
        self.sent_batches = 0
        self.accepted = 0
        self.duplicates = 0
        self.rejected = 0
        self.dropped = 0  # buffer full: never sent
        self.dropped_reported = 0  # of those, acknowledged by the control plane
        self.failed_attempts = 0  # sends that did not get a 200 (and were retried)
        self.refused_batches = 0  # refused for good (4xx): their events are counted as dropped
        self.undeliverable = 0  # single events the server kept failing (5xx): counted as dropped
        self.malformed_replies = 0  # a 200 whose body made no sense: taken as acknowledged
        self.loop_errors = 0  # unexpected exceptions the background threads logged and survived
        self.fleet_polls = 0
        self.trial_requests = 0  # POST /api/v1/tools/{tool}/trial sent
        self.trials_granted = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


# -- the client ----------------------------------------------------------------------------------


class ControlPlane:
    """One per agent worker process: worker-scope breakers, the fleet view, and the sender.

    ``url`` is the control plane's base URL (``http://host:8000``). Network calls happen only
    on the two background threads, each with ``timeout`` seconds per request. ``scopes`` names
    the breakers that may remove a tool from this plane's runs (all by default).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str,
        worker_id: str,
        batch_size: int = 100,
        flush_interval: float = 1.0,
        max_buffer: int = 10_000,
        timeout: float = 5.0,
        fleet_poll_interval: float = 1.0,
        fleet_wait: float = 20.0,
        trial_retry_interval: float = 5.0,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        server_error_tries: int = 3,
        threshold: int = ToolBreaker.THRESHOLD,
        cooldown: float = DEFAULT_COOLDOWN,
        max_cooldown: float = DEFAULT_MAX_COOLDOWN,
        clock: Clock = time.monotonic,
        scopes: Iterable[str] = ALL_SCOPES,
        start: bool = True,
        classify: Classifier | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://host[:port], got {url!r}")
        if not worker_id or len(worker_id) > 200:
            raise ValueError("worker_id must be 1-200 characters")
        unknown = set(scopes) - set(ALL_SCOPES)
        if unknown:
            raise ValueError(f"scopes must be among {list(ALL_SCOPES)}, got {sorted(unknown)}")
        # Which breakers may remove a tool from this plane's runs. Every scope is on by default;
        # turning one off is for comparisons (the outage replay) and staged roll-outs.
        self.scopes = frozenset(Scope(name) for name in scopes)
        self.threshold = threshold
        self.url = url.rstrip("/")
        self.worker_id = worker_id
        self.batch_size = max(1, batch_size)
        self.flush_interval = flush_interval
        self.max_buffer = max(self.batch_size, max_buffer)
        self.timeout = timeout
        self.fleet_poll_interval = fleet_poll_interval
        # Long-poll: the control plane holds the fleet request open up to this long and answers
        # as soon as the fleet changes. 0 polls every fleet_poll_interval instead, which is also
        # what happens when the server does not say it waited (an older or a sync-worker server).
        self.fleet_wait = max(0.0, fleet_wait)
        self._server_waits = False  # the last fleet answer said the server long-polls
        self._held: http.client.HTTPConnection | None = None  # the long-poll in progress
        # Another worker holds the trial lease: it is free again only when that lease lapses
        # (120 s) or its call was semantic, so asking every poll would only add load.
        self.trial_retry_interval = trial_retry_interval
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        # A 5xx without Retry-After this many times in a row: split the batch (see _deliver).
        self.server_error_tries = max(1, server_error_tries)
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._base_path = parts.path.rstrip("/")
        self._headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "User-Agent": "breakers-sdk",
        }
        self.stats = SenderStats()
        self.fleet = ExternalScope(Scope.FLEET, clock=clock)
        self.fleet_version = -1
        self.worker = WorkerBreakers(
            threshold=threshold,
            cooldown=cooldown,
            max_cooldown=max_cooldown,
            clock=clock,
            on_transition=self._on_worker_transition,
            classify=classify,
        )
        self._buffer: deque[_Recorded | dict[str, Any]] = deque()
        self._in_flight = 0  # events taken from the buffer and not yet acknowledged
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._flush_requested = False
        self._woken = False  # a full batch has woken the sender since it last took one
        self._drop_report: tuple[str, int] | None = None  # (id, count) resent until acknowledged
        self._fleet_etag: str | None = None
        self._trial_body = json.dumps({"worker_id": worker_id}).encode()
        self._empty_batch = _encode({"worker_id": worker_id, "events": []})
        # Weak: a run the agent dropped without finish() stops counting once collected.
        self._runs_in_progress: weakref.WeakSet[Run] = weakref.WeakSet()
        self._stopping = threading.Event()
        self._closed = False
        self._threads: list[threading.Thread] = []
        if start:
            self.start()

    # -- public ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the background threads (done by the constructor unless ``start=False``)."""
        if self._threads:
            return
        # The threads hold a weak reference, so a plane nobody uses can still be collected.
        ref = weakref.ref(self)
        for target, name in ((_send_loop, "sender"), (_poll_loop, "fleet-poll")):
            thread = threading.Thread(
                target=target, args=(ref, self._stopping), name=f"breakers-{name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        atexit.register(self.close)

    def start_run(
        self, *, agent: str, step_budget: int | None = None, run_id: str | None = None
    ) -> Run:
        run = Run(self, run_id=run_id or f"run-{_ids.new()}", agent=agent, step_budget=step_budget)
        self._emit(
            {
                "type": "run.started",
                "run_id": run.run_id,
                "agent": agent,
                "step_budget": step_budget,
            }
        )
        return run

    def flush(self, timeout: float = 5.0) -> bool:
        """Send everything buffered now; True if it was all acknowledged within ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._wake:
            self._flush_requested = True
            self._wake.notify_all()
            while self._buffer or self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0 or not self._threads or not self._threads[0].is_alive():
                    return False
                self._wake.wait(min(left, 0.05))
            return True

    def close(self, timeout: float = 5.0) -> bool:
        """Flush, then stop the threads; returns within ``timeout`` seconds whatever the control
        plane does (a thread still waiting on a request is left to end on its own: daemon).
        Safe to call twice."""
        if self._closed:
            return True
        deadline = time.monotonic() + timeout
        self._closed = True
        atexit.unregister(self.close)
        flushed = self.flush(timeout) if self._threads else not self._buffer
        self._stopping.set()
        with self._wake:
            self._wake.notify_all()
        self._cut_long_poll()
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if not flushed:
            logger.warning("closed with %d events not delivered", self.pending())
        return flushed

    def _cut_long_poll(self) -> None:
        """Wake the poll thread out of a held fleet request (shutdown interrupts a blocked read
        on another thread; close alone may not), so closing never waits for the server."""
        held = self._held
        sock = getattr(held, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing to wake
                sock.shutdown(socket.SHUT_RDWR)

    def pending(self) -> int:
        """Events buffered or in flight."""
        return len(self._buffer) + self._in_flight

    def update_fleet(self, snapshot: Mapping[str, Any], *, authoritative: bool = False) -> None:
        """Take a fleet snapshot (``{"version", "tools"}``). Replies may arrive out of order, so
        an older version is ignored unless ``authoritative`` (the poll: after a rebuild the
        control plane's version may start again lower)."""
        version = snapshot.get("version")
        tools = snapshot.get("tools")
        if not isinstance(version, int) or not isinstance(tools, Mapping):
            return
        states: dict[str, ScopeState] = {}
        for name, entry in tools.items():
            try:
                state = State(entry.get("state"))
            except (AttributeError, ValueError):
                continue  # a state this SDK does not know: ignore rather than guess
            states[name] = ScopeState(
                state,
                str(entry.get("reason") or ""),
                last_error=str(entry.get("last_error") or ""),
                trial=str(entry.get("trial") or ""),
                since=str(entry.get("since") or ""),
            )
        with self._lock:
            if version < self.fleet_version and not authoritative:
                return
            self.fleet_version = version
            self.fleet.update(states)

    # -- recording (agent thread; never blocks on the network) ---------------------------

    def _emit(self, event: dict[str, Any]) -> None:
        """Buffer `event` (without id and ts: the sender thread adds them)."""
        self._append((time.time(), event))

    def _append(self, item: _Recorded) -> None:
        # Without the lock: a deque's append is atomic, and the sender only ever takes from the
        # front under the lock, so the bound is approximate by the few threads recording at
        # once. A full batch wakes the sender once; it re-arms that when it takes a batch, so
        # while it backs off, recording stays lock-free.
        buffer = self._buffer
        if len(buffer) + self._in_flight < self.max_buffer:
            buffer.append(item)
            if len(buffer) >= self.batch_size and not self._woken:
                with self._wake:
                    self._woken = True
                    self._wake.notify_all()
            return
        with self._lock:
            self.stats.dropped += 1

    def buffered(self) -> list[dict[str, Any]]:
        """The events waiting to be sent, as they will be sent (for tests and debugging)."""
        with self._lock:
            # From the front, as the sender takes: a run may append at the back meanwhile.
            events = [_materialize(self._buffer.popleft()) for _ in range(len(self._buffer))]
            self._buffer.extendleft(reversed(events))
        return events

    def _emit_transition(
        self, tool: str, scope: Scope, state: State, reason: str, *, run_id: str | None
    ) -> None:
        self._emit(
            {
                "type": "breaker.transition",
                "run_id": run_id,
                "scope": str(scope),
                "tool": tool,
                "state": str(state),
                "reason": _clip(reason),
            }
        )

    def _on_worker_transition(
        self, tool: str, scope: Scope, old_state: State, new_state: State, reason: str, /
    ) -> None:
        self._emit_transition(tool, scope, new_state, reason, run_id=None)

    # -- sending (background thread) -------------------------------------------------------

    def _next_batch(self, stopping: threading.Event) -> list[dict[str, Any]] | None:
        """Wait until a batch is due; take it out of the buffer (None: stop)."""
        with self._wake:
            first_seen: float | None = None
            while True:
                if self._buffer or self._drop_report or self.stats.dropped > self._reported():
                    if first_seen is None:
                        first_seen = time.monotonic()
                    due = (
                        len(self._buffer) >= self.batch_size
                        or self._flush_requested
                        or stopping.is_set()
                        or time.monotonic() - first_seen >= self.flush_interval
                    )
                    if due:
                        break
                    self._wake.wait(self.flush_interval - (time.monotonic() - first_seen))
                    continue
                self._flush_requested = False
                if stopping.is_set():
                    return None
                self._wake.wait(self.flush_interval)
            count = min(self.batch_size, len(self._buffer))
            taken = [self._buffer.popleft() for _ in range(count)]
            self._in_flight = count
            self._woken = False
            if self._drop_report is None and self.stats.dropped > self._reported():
                self._drop_report = (_ids.new(), self.stats.dropped - self._reported())
        return [_materialize(item) for item in taken]  # outside the lock the agent appends under

    def _reported(self) -> int:
        return self.stats.dropped_reported + (self._drop_report[1] if self._drop_report else 0)

    def _deliver(self, batch: list[dict[str, Any]], stopping: threading.Event) -> bool:
        """Send one batch until each of its events is acknowledged or dropped; False if the
        plane stopped first (what is left is back at the front of the buffer).

        The batch may be cut into parts: halves of a batch too big for the server (413), and
        halves of a batch the server keeps failing (5xx without ``Retry-After``), bisected down
        to the event it cannot take. ``parts`` is a stack; its last entry is sent next, with the
        number of server errors it may have before it is split (or, alone, dropped).
        """
        tries = max(1, self.server_error_tries)
        parts: list[tuple[list[dict[str, Any]], int]] = [(batch, tries)]
        failures = 0  # answers in a row that were not a 200: the backoff grows with them
        errors = 0  # server errors of the part being sent
        while parts:
            events, allowed = parts[-1]
            status, headers, reply = self._request("POST", "/api/v1/events", self._body(events))
            if status == 200:
                parts.pop()
                self._acknowledge(reply)
                self._finish_batch(done=len(events))
                failures = errors = 0
                continue
            self.stats.failed_attempts += 1
            answer = _classify(status, headers)
            if status == 413 and len(events) > 1:
                # Too big for the server's limits: send it in halves (same ids, still once).
                parts.pop()
                half = len(events) // 2
                parts += [(events[half:], allowed), (events[:half], allowed)]
                errors = 0
                continue
            if answer is _Answer.REFUSED:
                # Refused for good (a single event too big, a bad body, a wrong URL): resending
                # the same bytes cannot help, and would hold up every later event. Drop it.
                logger.error(
                    "control plane refused a batch of %d events with HTTP %d; dropping it: %.300r",
                    len(events),
                    status,
                    reply,
                )
                parts.pop()
                self.stats.refused_batches += 1
                self._finish_batch(done=len(events), dropped=len(events))
                errors = 0
                continue
            if answer is _Answer.SERVER_ERROR:
                errors += 1
                if errors >= allowed:
                    errors = 0
                    if len(events) > 1:
                        # The server keeps failing this batch: isolate what it cannot take.
                        # A half it takes goes through at once; a failing half is split again
                        # after one more error, so finding one bad event takes log2(n) sends.
                        parts.pop()
                        parts += _halves(events, tries)
                        failures = 0  # a new request: no reason yet to wait longer
                        continue
                    if self._takes_batches():
                        parts.pop()
                        if events:  # (an empty part carried only a drop report: now sent)
                            self._drop_undeliverable(events[0], status, reply)
                        failures = 0
                        continue
                    # The server fails an empty batch too: it is down, not this event. Keep it,
                    # and look again after as many errors.
            failures += 1
            delay = self._retry_delay(failures, headers)
            if status == 401 and failures == 1:
                logger.error("control plane refused the agent token (401); will keep retrying")
            if stopping.wait(delay):
                # close() gave up waiting: keep the events (pending() counts them) and stop.
                self._requeue_front([event for part, _ in reversed(parts) for event in part])
                return False
        return True

    def _body(self, events: list[dict[str, Any]]) -> bytes:
        body: dict[str, Any] = {"worker_id": self.worker_id, "events": events}
        if self._drop_report is not None:
            body["dropped"] = {"id": self._drop_report[0], "count": self._drop_report[1]}
        return _encode(body)

    def _takes_batches(self) -> bool:
        """Does the control plane take a batch at all right now (an empty one)? Tells an event
        it cannot take from a control plane that is down behind a proxy answering 502.

        The empty batch carries the drop report when one is due, like the failing batch did:
        if only the report is what the server cannot take, the report is given up (logged)
        rather than every event that would carry it, and False lets the event be tried again.
        """
        status, _, reply = self._request("POST", "/api/v1/events", self._body([]))
        if status == 200:
            self._acknowledge(reply)  # the drop report, if any, is now reported
            return True
        report = self._drop_report
        if report is None or _classify(status, {}) is not _Answer.SERVER_ERROR:
            return False
        bare, _, _ = self._request("POST", "/api/v1/events", self._empty_batch)
        if bare == 200:
            logger.error(
                "control plane answered HTTP %d to the report of %d dropped events while taking "
                "an empty batch; giving up on reporting them: %.300r",
                status,
                report[1],
                reply,
            )
            with self._lock:  # counted as reported, so _next_batch() does not report it again
                self.stats.dropped_reported += report[1]
                self._drop_report = None
        return False

    def _drop_undeliverable(self, event: dict[str, Any], status: int, reply: Any) -> None:
        logger.error(
            "control plane answered HTTP %d to a %s event (id %s) %d times while taking other "
            "batches; dropping it: %.300r",
            status,
            event.get("type"),
            event.get("id"),
            self.server_error_tries,
            reply,
        )
        self.stats.undeliverable += 1
        self._finish_batch(done=1, dropped=1)

    def _acknowledge(self, reply: Any) -> None:
        """A 200: the batch is in. A reply that makes no sense still means that; its counts are
        unknown, so they are left out of the stats (resending would only make duplicates)."""
        stats = self.stats
        stats.sent_batches += 1
        if not isinstance(reply, Mapping):
            reply = {}
        accepted, duplicates = reply.get("accepted"), reply.get("duplicates", 0)
        rejected = reply.get("rejected", [])
        if _is_count(accepted) and _is_count(duplicates) and isinstance(rejected, list):
            stats.accepted += accepted
            stats.duplicates += duplicates
            stats.rejected += len(rejected)
            for item in rejected[:5]:
                logger.warning("control plane rejected an event: %.300r", item)
        else:
            stats.malformed_replies += 1
            logger.warning(
                "control plane acknowledged a batch with a malformed reply: %.300r", reply
            )
        with self._lock:  # _next_batch() compares these with the drop count under the lock
            if self._drop_report is not None:
                stats.dropped_reported += self._drop_report[1]
                self._drop_report = None
        fleet = reply.get("fleet")
        if isinstance(fleet, Mapping):
            self.update_fleet(fleet)

    def _finish_batch(self, done: int | None = None, dropped: int = 0) -> None:
        """``done`` events in flight are over (all of them by default), ``dropped`` of them lost."""
        with self._wake:
            self._in_flight = 0 if done is None else max(0, self._in_flight - done)
            self.stats.dropped += dropped
            self._wake.notify_all()

    def _requeue_front(self, events: list[dict[str, Any]]) -> None:
        with self._wake:
            self._buffer.extendleft(reversed(events))
            self._in_flight = max(0, self._in_flight - len(events))

    def _retry_delay(self, failures: int, headers: Mapping[str, str]) -> float:
        retry_after = headers.get("retry-after")
        if retry_after is not None:
            try:
                return min(self.backoff_max, max(0.0, float(retry_after)))
            except ValueError:
                pass  # an HTTP date: fall back to backoff
        exponential = min(self.backoff_max, self.backoff_base * 2 ** (failures - 1))
        return random.uniform(exponential / 2, exponential)  # jitter spreads a fleet's retries

    # -- fleet polling (background thread) ---------------------------------------------------

    def _fleet_wait_now(self) -> float:
        """How long to ask the server to hold this poll: the full ``fleet_wait``, except while a
        half-open tool may want its trial asked for (or asked again) at the polling cadence."""
        if not self.fleet_wait:
            return 0.0
        may_ask = Scope.FLEET in self.scopes and bool(self._runs_in_progress)
        if may_ask and any(s.state is State.HALF_OPEN for s in self.fleet.snapshot().values()):
            return min(self.fleet_wait, self.fleet_poll_interval)
        return self.fleet_wait

    def next_fleet_poll_delay(self) -> float:
        """Pause before the next poll: none after a long-poll (the server did the waiting)."""
        return _LONG_POLL_GAP if self._server_waits else self.fleet_poll_interval

    def _poll_fleet(self) -> bool:
        """One ``GET /api/v1/fleet`` (a long-poll when ``fleet_wait``); False when it failed
        (the caller backs off). One request at a time: one open connection per plane."""
        extra = {"If-None-Match": self._fleet_etag} if self._fleet_etag else {}
        wait = self._fleet_wait_now()
        path = f"/api/v1/fleet?wait={wait:g}" if wait else "/api/v1/fleet"
        timeout = self.timeout + wait
        status, headers, reply = self._request("GET", path, None, extra, timeout=timeout)
        self._server_waits = bool(wait) and status in (200, 304) and "x-fleet-wait" in headers
        self.stats.fleet_polls += 1
        if status == 200 and isinstance(reply, Mapping):
            self._fleet_etag = headers.get("etag")
            self.update_fleet(reply, authoritative=True)
            return True
        return status in (304, 404)  # 404: a control plane without the fleet endpoint

    def _ask_for_trials(self) -> None:
        """Ask for the trial lease of each half-open tool that wants one (poll thread)."""
        if Scope.FLEET not in self.scopes or not self._runs_in_progress:
            return
        for name, status in self.fleet.trials_to_request():
            self._ask_for_trial(name, status)

    def _ask_for_trial(self, name: str, status: ScopeState) -> None:
        asked_at = self.fleet.clock()  # before sending: the lease cannot have begun earlier
        path = f"/api/v1/tools/{quote(name, safe='')}/trial"
        code, headers, reply = self._request("POST", path, self._trial_body)
        self.stats.trial_requests += 1
        try:
            grant = _read_grant(code, headers, reply)
        except ValueError as exc:
            logger.warning(
                "trial lease for %s not obtained (%s); asking on the next poll", name, exc
            )
            return
        if grant is None:
            self.fleet.refuse_trial(name, status, retry_at=asked_at + self.trial_retry_interval)
            return
        window, seconds_left = grant
        if self.fleet.grant_trial(name, status, window=window, expires_at=asked_at + seconds_left):
            self.stats.trials_granted += 1

    # -- HTTP ------------------------------------------------------------------------------

    def _connection(self, timeout: float | None = None) -> http.client.HTTPConnection:
        timeout = self.timeout if timeout is None else timeout
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        extra_headers: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        """One request on a fresh connection; status 0 for a network error. Never raises.
        A request with its own ``timeout`` (the long-poll) can be cut short by ``close()``."""
        connection = self._connection(timeout)
        if timeout is not None:
            self._held = connection
        try:
            connection.request(
                method,
                self._base_path + path,
                body=body,
                headers={**self._headers, **(extra_headers or {})},
            )
            response = connection.getresponse()
            raw = response.read()
            headers = {key.lower(): value for key, value in response.getheaders()}
        except (OSError, http.client.HTTPException) as exc:
            logger.debug("%s %s failed: %s", method, path, exc)
            return 0, {}, None
        finally:
            if timeout is not None:
                self._held = None
            connection.close()
        try:
            reply = json.loads(raw) if raw else None
        except ValueError:
            reply = None
        return response.status, headers, reply


def _encode(body: Mapping[str, Any]) -> bytes:
    # default=str: a value JSON cannot carry (a Decimal cost, say) must not make the whole batch
    # unsendable; the control plane rejects that one event with a reason instead.
    return json.dumps(body, default=str).encode()


class _Answer(enum.Enum):
    LATER = "later"  # resend the same batch later, as often as it takes
    SERVER_ERROR = "server error"  # resend a few times, then isolate the event it cannot take
    REFUSED = "refused"  # resending the same bytes cannot help


def _classify(status: int, headers: Mapping[str, str]) -> _Answer:
    """How to treat an answer other than 200. 0 is no answer (connection error, timeout); 401
    is retried too, since the token may be fixed meanwhile. A 5xx other than 503 without a
    ``Retry-After`` may be an event the server cannot take (a bug on its side), so it is not
    resent forever: one such event must not block every later event of the worker."""
    if status in _LATER_STATUSES or (status >= 500 and "retry-after" in headers):
        return _Answer.LATER
    if status >= 500:
        return _Answer.SERVER_ERROR
    return _Answer.REFUSED


def _halves(events: list[dict[str, Any]], tries: int) -> list[tuple[list[dict[str, Any]], int]]:
    """Two stack entries for ``_deliver``, the first half on top. A half of a batch the server
    failed is split again after one error, but a single event gets all ``tries``."""
    half = len(events) // 2
    first, second = events[:half], events[half:]
    return [(second, tries if len(second) == 1 else 1), (first, tries if len(first) == 1 else 1)]


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _read_grant(code: int, headers: Mapping[str, str], reply: Any) -> tuple[int, float] | None:
    """``(window, seconds left)`` of a granted trial lease, None if refused; ValueError when the
    request failed or the answer makes no sense."""
    if code != 200 or not isinstance(reply, Mapping):
        raise ValueError(f"HTTP {code}" if code else "no answer")
    if reply.get("granted") is False:
        return None
    window, expires = reply.get("window"), reply.get("expires_at")
    if (
        reply.get("granted") is not True
        or not isinstance(window, int)
        or not isinstance(expires, str)
    ):
        raise ValueError(f"unexpected answer {reply!r:.200}")
    expires_at = datetime.fromisoformat(expires)
    if expires_at.tzinfo is None:
        raise ValueError(f"expires_at without a time zone: {expires!r}")
    # The server's own clock (its Date header) measures what is left: this host's may be off.
    seconds_left = (expires_at - _server_now(headers)).total_seconds() - _DATE_RESOLUTION
    if seconds_left <= 0:
        raise ValueError(f"the lease has already expired ({expires})")
    return window, seconds_left


def _server_now(headers: Mapping[str, str]) -> datetime:
    try:
        moment = email.utils.parsedate_to_datetime(headers.get("date", ""))
    except (TypeError, ValueError):
        return datetime.now(UTC)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# The background loops must outlive any bug or surprise in one round: a dead sender would
# leave every later event in the buffer. An unexpected exception is logged with its traceback,
# counted, and the loop goes on after a backoff (growing while the exceptions repeat).


def _send_loop(ref: Callable[[], ControlPlane | None], stopping: threading.Event) -> None:
    errors = 0
    while True:
        plane = ref()
        if plane is None:
            return
        try:
            batch = plane._next_batch(stopping)
            if batch is None or not plane._deliver(batch, stopping):
                return
            errors = 0
        except Exception:
            errors += 1
            plane.stats.loop_errors += 1
            # The batch may be what breaks the round: count what is still in flight as dropped
            # rather than retry it forever, and keep flush() from waiting on it.
            with plane._lock:
                lost = plane._in_flight
            logger.exception("the event sender failed; %d events dropped, carrying on", lost)
            plane._finish_batch(dropped=lost)
            delay = plane._retry_delay(errors, {})
            del plane
            if stopping.wait(delay):
                return
            continue
        del plane


def _poll_loop(ref: Callable[[], ControlPlane | None], stopping: threading.Event) -> None:
    failures = 0
    while not stopping.is_set():
        plane = ref()
        if plane is None:
            return
        try:
            failures = 0 if plane._poll_fleet() else failures + 1
            if not failures:
                plane._ask_for_trials()
        except Exception:
            failures += 1
            plane.stats.loop_errors += 1
            logger.exception("the fleet poll failed; carrying on")
        delay = plane.next_fleet_poll_delay()
        if failures:
            delay = plane._retry_delay(failures, {})
        del plane
        stopping.wait(delay)
