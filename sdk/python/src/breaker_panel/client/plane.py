"""The ControlPlane: one per agent worker process. It holds the worker-scope breakers and the
fleet view, starts runs, and owns the two background threads (the sender and the fleet sync).

Nothing on the agent's side waits on the network: ``available()``, ``notice()`` and every
``record_*()`` touch in-process state only. The why:
docs/adr/0126-the-controlplane-hot-path-flat-tuples.md.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

from breaker_panel.client.config import PlaneConfig
from breaker_panel.client.events import transition_event
from breaker_panel.client.fleet_sync import FleetSync
from breaker_panel.client.ids import process_ids
from breaker_panel.client.run import Run
from breaker_panel.client.sender import EventSender
from breaker_panel.client.stats import SenderStats
from breaker_panel.client.transport import Backoff, Transport
from breaker_panel.core import Clock
from breaker_panel.external_scope import ExternalScope, ScopeState
from breaker_panel.result_checks import ResultChecker
from breaker_panel.vocabulary import Scope, State, Way
from breaker_panel.worker import WorkerBreakers

logger = logging.getLogger("breaker_panel.client")

# The longest a run start may wait for a trial lease: a start must stay cheap whatever is asked.
MAX_TRIAL_WAIT = 2.0


class ControlPlane:
    """One per agent worker process: worker-scope breakers, the fleet view, and the sender.

    ``url`` is the control plane's base URL (``http://host:8000``). Every setting (thresholds,
    batching, timeouts, the fleet poll, which scopes may remove a tool) is in ``config``.
    Network calls happen only on the two background threads, which the constructor starts
    unless ``start=False``. ``clock`` times the worker breakers' cooldowns and trial leases.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str,
        worker_id: str,
        config: PlaneConfig | None = None,
        clock: Clock = time.monotonic,
        start: bool = True,
    ) -> None:
        config = PlaneConfig() if config is None else config
        self.config = config
        self.transport = Transport(url, token=token, timeout=config.timeout)  # checks the url
        if not worker_id or len(worker_id) > 200:
            raise ValueError("worker_id must be 1-200 characters")
        # Which breakers may remove a tool from this plane's runs.
        self.scopes = frozenset(Scope(name) for name in config.scopes)
        self.threshold = config.threshold
        self.result_checks = (
            ResultChecker() if config.result_checks is None else config.result_checks
        )
        self.url = url.rstrip("/")
        self.worker_id = worker_id
        self.stats = SenderStats()
        self.fleet = ExternalScope(Scope.FLEET, clock=clock)
        backoff = Backoff(base=config.backoff_base, cap=config.backoff_max)
        self.sender = EventSender(
            self.transport,
            self.stats,
            worker_id=worker_id,
            batch_size=config.batch_size,
            max_batch_size=config.max_batch_size,
            flush_interval=config.flush_interval,
            max_buffer=config.max_buffer,
            backoff=backoff,
            server_error_tries=config.server_error_tries,
            on_fleet=self.update_fleet,
        )
        self.fleet_sync = FleetSync(
            self.transport,
            self.stats,
            self.fleet,
            worker_id=worker_id,
            poll_interval=config.fleet_poll_interval,
            wait=config.fleet_wait,
            trial_retry_interval=config.trial_retry_interval,
            backoff=backoff,
            may_ask_for_trials=self._may_ask_for_trials,
            on_snapshot=self.update_fleet,
            ask_for_trials=self._ask_for_trials,
        )
        self.worker = WorkerBreakers(
            threshold=config.threshold,
            cooldown=config.cooldown,
            max_cooldown=config.max_cooldown,
            clock=clock,
            on_transition=self._on_worker_transition,
            classify=config.classify,
        )
        # Weak: a run the agent dropped without finish() stops counting once collected.
        self.runs_in_progress: weakref.WeakSet[Run] = weakref.WeakSet()
        self._stopping = threading.Event()
        self._closed = False
        if start:
            self.start()

    def start(self) -> None:
        """Start the background threads (done by the constructor unless ``start=False``)."""
        if self.sender.thread is not None:
            return
        self.sender.start(self._stopping)
        self.fleet_sync.start(self._stopping)
        atexit.register(self.close)

    def start_run(
        self,
        *,
        agent: str,
        step_budget: int | None = None,
        run_id: str | None = None,
        trial_wait: float = 0.0,
        way: Way | str | None = None,
    ) -> Run:
        """A new run. If a fleet tool this worker's runs offer is half-open and this worker
        does not hold its trial lease, the lease is asked for at once (in the background);
        ``trial_wait`` > 0 waits up to that many seconds for the answer, so that this run
        can make the trial itself (docs/adr/0177-run-start-asks-for-trials.md). ``way``: how
        this run's ``toolset()`` takes a lost tool away (default: the plane's ``way``)."""
        run_id = run_id or f"run-{process_ids.new()}"
        run = Run(
            self,
            run_id=run_id,
            agent=agent,
            step_budget=step_budget,
            way=self.config.way if way is None else way,
        )
        if Scope.FLEET in self.scopes:
            self.fleet_sync.want_trials(wait=min(max(0.0, trial_wait), MAX_TRIAL_WAIT))
        self.sender.emit(
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
        return self.sender.flush(timeout)

    def close(self, timeout: float = 5.0) -> bool:
        """Flush, then stop the threads; returns within ``timeout`` seconds whatever the control
        plane does (a thread still waiting on a request is left to end on its own: daemon).
        Safe to call twice."""
        if self._closed:
            return True
        deadline = time.monotonic() + timeout
        self._closed = True
        atexit.unregister(self.close)
        flushed = self.flush(timeout) if self.sender.thread else not self.sender.buffer
        self._stopping.set()
        self.sender.wake()
        self.fleet_sync.wake.set()  # out of the pause between polls
        self.transport.cut_held()  # the long-poll, so that closing never waits for the server
        for thread in self.threads():
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self.transport.close()  # the kept-alive connections (local: never waits for the server)
        if not flushed:
            logger.warning("closed with %d events not delivered", self.pending())
        return flushed

    def threads(self) -> list[threading.Thread]:
        """The background threads started so far (none before ``start()``)."""
        return [t for t in (self.sender.thread, self.fleet_sync.thread) if t is not None]

    def pending(self) -> int:
        """Events buffered or in flight."""
        return self.sender.pending()

    def buffered(self) -> list[dict[str, Any]]:
        """The events waiting to be sent, as they will be sent (for tests and debugging)."""
        return self.sender.buffered()

    @property
    def _in_flight(self) -> int:
        # The outage replay paces its runs on the events in flight (breakers/replay/governor.py).
        return self.sender.in_flight

    # -- fleet sync hooks: a subclass may add to these (the MCP gateway's GatewayPlane does) --

    def update_fleet(self, snapshot: Mapping[str, Any], *, authoritative: bool = False) -> None:
        """Take a fleet snapshot (``{"version", "tools"}``) from a poll or an ingest reply; an
        older version than the last is ignored unless ``authoritative`` (a poll)."""
        self.fleet_sync.update(snapshot, authoritative=authoritative)

    def _ask_for_trials(self) -> None:
        """Ask for the trial lease of each half-open tool that wants one (poll thread)."""
        self.fleet_sync.ask_for_trials()

    def _ask_for_trial(self, name: str, status: ScopeState) -> None:
        self.fleet_sync.ask_for_trial(name, status)

    def _may_ask_for_trials(self) -> bool:
        # Only while this worker has a run in progress: an idle worker must never sit on the
        # fleet's only trial.
        return Scope.FLEET in self.scopes and bool(self.runs_in_progress)

    def _on_worker_transition(
        self, tool: str, scope: Scope, old_state: State, new_state: State, reason: str, /
    ) -> None:
        self.sender.emit(transition_event(tool, scope, new_state, reason, run_id=None))
