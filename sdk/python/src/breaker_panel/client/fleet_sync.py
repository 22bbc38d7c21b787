"""Fleet sync: the poll thread that keeps a plane's view of the fleet breakers, and asks for the
half-open trial lease of a tool without a probe.

It long-polls ``GET /api/v1/fleet?wait=N`` with ``If-None-Match`` (one request open per plane)
and falls back to polling every ``poll_interval`` when the server does not hold the request.
After each poll it asks ``POST /api/v1/tools/{tool}/trial`` for each half-open tool that wants
a trial, while this worker has a run in progress; a refusal is asked again after
``trial_retry_interval``, an error on the next poll. A run that starts, or offers a half-open
tool, while such a lease is wanted ``nudge()``s the thread to ask at once (cutting a held
long-poll short); that round asks even if the run is over by then. The why:
docs/adr/0052-when-a-worker-asks-for-the.md, docs/adr/0177-run-start-asks-for-trials.md,
docs/adr/0190-a-short-run-is-owed-its-lease-request.md.
"""

from __future__ import annotations

import email.utils
import json
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from breaker_panel.client.stats import SenderStats
from breaker_panel.client.transport import Backoff, Transport
from breaker_panel.external_scope import ExternalScope, ScopeState
from breaker_panel.vocabulary import State

logger = logging.getLogger("breaker_panel.client")

# An HTTP Date header has whole seconds: count a lease as that much shorter than it says.
_DATE_RESOLUTION = 1.0
# Between two long-polls: a change meanwhile is answered at once by the next one, so this adds
# no latency; it only keeps a misbehaving server from spinning the poll thread.
_LONG_POLL_GAP = 0.01


class FleetSync:
    """Keeps ``fleet`` (the plane's fleet scope) up to date from the control plane.

    The plane passes its own methods as ``on_snapshot`` and ``ask_for_trials`` so that a
    subclass of the plane (the MCP gateway's) can add to them; ``may_ask_for_trials`` says
    whether this worker wants trial leases now.
    """

    def __init__(
        self,
        transport: Transport,
        stats: SenderStats,
        fleet: ExternalScope,
        *,
        worker_id: str,
        poll_interval: float,
        wait: float,
        trial_retry_interval: float,
        backoff: Backoff,
        may_ask_for_trials: Callable[[], bool],
        on_snapshot: Callable[..., None] | None = None,
        ask_for_trials: Callable[[], None] | None = None,
    ) -> None:
        self.transport = transport
        self.stats = stats
        self.fleet = fleet
        self.poll_interval = poll_interval
        # Long-poll: the control plane holds the fleet request open up to this long and answers
        # as soon as the fleet changes. 0 polls every poll_interval instead, which is also what
        # happens when the server does not say it waited (an older or a sync-worker server).
        self.wait = max(0.0, wait)
        # Another worker holds the trial lease: it is free again only when that lease lapses
        # (120 s) or its call was semantic, so asking every poll would only add load.
        self.trial_retry_interval = trial_retry_interval
        self.backoff = backoff
        self.may_ask_for_trials = may_ask_for_trials
        self.on_snapshot = self.update if on_snapshot is None else on_snapshot
        self.ask_for_trials_hook = self.ask_for_trials if ask_for_trials is None else ask_for_trials
        self.version = -1
        self.server_waits = False  # the last fleet answer said the server long-polls
        self.thread: threading.Thread | None = None
        self._etag: str | None = None
        self._lock = threading.Lock()
        self._trial_body = json.dumps({"worker_id": worker_id}).encode()
        # A nudge: ask for wanted trial leases now, not after the poll in progress. ``wake``
        # ends the pause between polls early; close() sets it too.
        self.wake = threading.Event()
        self._nudged = False
        # After a failed lease request, nudges wait this long: runs that keep starting must not
        # ask a failing control plane at their own rate (the polls still ask, as before).
        self._quiet_until = float("-inf")
        self._rounds = threading.Condition()
        self._rounds_started = 0  # ask rounds begun and ended, for a run start that waits
        self._rounds_done = 0
        # A run wanted a lease (it started, or offered a half-open tool): the next ask round
        # asks even if that run is over by then. Short runs end in microseconds, long before
        # this thread wakes, and must not find "no run in progress" every time.
        self._owed = False
        fleet.on_trial_wanted = _weak_call(self.run_wants_trials)

    def start(self, stopping: threading.Event) -> None:
        # The thread holds a weak reference, so a sync nobody uses can still be collected.
        self.thread = threading.Thread(
            target=_poll_loop,
            args=(weakref.ref(self), stopping, self.wake),
            name="breakers-fleet-poll",
            daemon=True,
        )
        self.thread.start()

    def update(self, snapshot: Mapping[str, Any], *, authoritative: bool = False) -> None:
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
            if version < self.version and not authoritative:
                return
            self.version = version
            self.fleet.update(states)

    def poll(self) -> bool:
        """One ``GET /api/v1/fleet`` (a long-poll when ``wait``); False when it failed
        (the caller backs off). One request at a time: one open connection per plane."""
        extra = {"If-None-Match": self._etag} if self._etag else {}
        wait = self._wait_now()
        path = f"/api/v1/fleet?wait={wait:g}" if wait else "/api/v1/fleet"
        timeout = self.transport.timeout + wait
        status, headers, reply = self.transport.request("GET", path, None, extra, timeout=timeout)
        self.server_waits = bool(wait) and status in (200, 304) and "x-fleet-wait" in headers
        self.stats.fleet_polls += 1
        if status == 0 and self._nudged:
            return True  # cut short by a nudge, not a failure: ask, then poll again
        if status == 200 and isinstance(reply, Mapping):
            self._etag = headers.get("etag")
            self.on_snapshot(reply, authoritative=True)
            return True
        return status in (304, 404)  # 404: a control plane without the fleet endpoint

    def next_poll_delay(self) -> float:
        """Pause before the next poll: none after a long-poll (the server did the waiting)."""
        return _LONG_POLL_GAP if self.server_waits else self.poll_interval

    def nudge(self) -> None:
        """Ask for the wanted trial leases at once (any thread; never waits on the network)."""
        if self.thread is None:
            return  # not started (``start=False``): whoever drives the polls asks
        with self._lock:
            if self._nudged or self.fleet.clock() < self._quiet_until:
                return  # one is on its way, or the last request failed a moment ago
            self._nudged = True
        self.wake.set()
        self.transport.interrupt_held()

    def run_wants_trials(self) -> None:
        """A run of this worker wants a lease now: one ask round is owed to it, whether or not
        the run is still in progress when the round comes."""
        with self._lock:
            self._owed = True
        self.nudge()

    def _take_owed(self) -> bool:
        with self._lock:
            owed, self._owed = self._owed, False
        return owed

    @property
    def nudged(self) -> bool:
        return self._nudged

    def ask_round(self) -> None:
        """One round of trial lease requests (poll thread), after a poll or a nudge."""
        with self._rounds:
            self._rounds_started += 1
        with self._lock:
            self._nudged = False
        self.transport.clear_interrupt()
        try:
            self.ask_for_trials_hook()
        finally:
            with self._rounds:
                self._rounds_done += 1
                self._rounds.notify_all()

    def want_trials(self, *, wait: float = 0.0) -> None:
        """A run has started: if this worker wants a half-open tool's lease it does not hold,
        ask now, and wait up to ``wait`` seconds for the answer (0: do not wait)."""
        if not self.may_ask_for_trials() or not self.fleet.trials_to_request():
            return
        with self._rounds:
            target = self._rounds_started + 1  # a round that begins after this nudge
        self.run_wants_trials()
        if wait > 0:
            with self._rounds:
                self._rounds.wait_for(lambda: self._rounds_done >= target, timeout=wait)

    def ask_for_trials(self) -> None:
        """Ask for the trial lease of each half-open tool that wants one (poll thread): while
        this worker has a run in progress, or once for a run that wanted it and is already over."""
        owed = self._take_owed()
        if not (owed or self.may_ask_for_trials()):
            return
        for name, status in self.fleet.trials_to_request():
            self.ask_for_trial(name, status)

    def ask_for_trial(self, name: str, status: ScopeState) -> None:
        asked_at = self.fleet.clock()  # before sending: the lease cannot have begun earlier
        path = f"/api/v1/tools/{quote(name, safe='')}/trial"
        code, headers, reply = self.transport.request("POST", path, self._trial_body)
        self.stats.trial_requests += 1
        try:
            grant = read_grant(code, headers, reply)
        except ValueError as exc:
            logger.warning(
                "trial lease for %s not obtained (%s); asking on the next poll", name, exc
            )
            with self._lock:
                self._quiet_until = asked_at + self.trial_retry_interval
            return
        if grant is None:
            self.fleet.refuse_trial(name, status, retry_at=asked_at + self.trial_retry_interval)
            return
        window, seconds_left = grant
        if self.fleet.grant_trial(name, status, window=window, expires_at=asked_at + seconds_left):
            self.stats.trials_granted += 1

    def _wait_now(self) -> float:
        """How long to ask the server to hold this poll: the full ``wait``, except while a
        half-open tool this worker's runs offer may want its trial asked for (or asked again)
        at the polling cadence."""
        if not self.wait:
            return 0.0
        if self.may_ask_for_trials() and self.fleet.offers_a_lease_trial():
            return min(self.wait, self.poll_interval)
        return self.wait


def read_grant(code: int, headers: Mapping[str, str], reply: Any) -> tuple[int, float] | None:
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


def _weak_call(method: Callable[[], None]) -> Callable[[], None]:
    """``method`` without keeping its object alive (the scope must not keep its sync alive)."""
    ref = weakref.WeakMethod(method)

    def call() -> None:
        bound = ref()
        if bound is not None:
            bound()

    return call


def _poll_loop(
    ref: Callable[[], FleetSync | None], stopping: threading.Event, wake: threading.Event
) -> None:
    """Like the sender's loop, it outlives any unexpected exception: logged, counted, backed off.
    A nudge ends the pause between polls (not a backoff: a failing server is not asked sooner)."""
    failures = 0
    while not stopping.is_set():
        sync = ref()
        if sync is None:
            return
        try:
            asked = sync.nudged
            if asked:
                sync.ask_round()  # a run wants a lease now: before a poll that may be held
            version = sync.fleet.version
            failures = 0 if sync.poll() else failures + 1
            # Once per poll; not again after the nudge's round unless the poll brought news.
            if not failures and (not asked or sync.nudged or sync.fleet.version != version):
                sync.ask_round()
        except Exception:
            failures += 1
            sync.stats.loop_errors += 1
            logger.exception("the fleet poll failed; carrying on")
        delay = sync.next_poll_delay()
        if failures:
            delay = sync.backoff.delay(failures, {})
        del sync
        if failures:
            stopping.wait(delay)
        else:
            wake.wait(delay)
            wake.clear()
