"""The background sender: a bounded buffer that ``record_*()`` appends to, and the thread that sends
it to ``POST /api/v1/events`` in batches.

A batch goes when ``batch_size`` events are waiting or ``flush_interval`` has passed; it takes
every waiting event up to ``max_batch_size``, so a backlog goes out in fewer, larger requests
(docs/adr/0187-the-sender-drains-a-backlog-in-larger-batches.md). A failed
send is retried with backoff and resent with the same event ids, so the control plane applies it
exactly once. "Later" answers (no answer, 401, 408, 429, 503, anything with ``Retry-After``) are
resent for as long as it takes; a batch the server keeps failing with another 5xx is bisected
down to the event it cannot take, and only that event is dropped (once an empty batch shows the
server is up). A full buffer drops new events (the oldest, which later ones refer to, are kept)
and reports their count with the next batch that gets through. The why:
docs/adr/0073-the-sdk-sender-splits-answers-three.md.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from breaker_panel.client.events import Recorded, materialize
from breaker_panel.client.ids import process_ids
from breaker_panel.client.stats import SenderStats
from breaker_panel.client.transport import Backoff, Transport, encode

logger = logging.getLogger("breaker_panel.client")

EVENTS_PATH = "/api/v1/events"
# "Nothing was written, send it again later": resent with the same ids until the server
# takes them, however long that is (with Retry-After, any status means that).
_LATER_STATUSES = frozenset({0, 401, 408, 429, 503})


class EventSender:
    """The buffer (appended to by agent threads, never blocking on the network) and its sender.

    ``on_fleet`` receives the fleet state that every ingest reply carries.
    """

    def __init__(
        self,
        transport: Transport,
        stats: SenderStats,
        *,
        worker_id: str,
        batch_size: int,
        max_batch_size: int,
        flush_interval: float,
        max_buffer: int,
        backoff: Backoff,
        server_error_tries: int,
        on_fleet: Callable[[Mapping[str, Any]], None],
    ) -> None:
        self.transport = transport
        self.stats = stats
        self.worker_id = worker_id
        self.batch_size = max(1, batch_size)
        # A backlog (events recorded while the last batch was on the wire) goes out in one
        # request up to this: the server's cost per request is then paid once per many events.
        self.max_batch_size = max(self.batch_size, max_batch_size)
        self.flush_interval = flush_interval
        self.max_buffer = max(self.batch_size, max_buffer)
        self.backoff = backoff
        # A 5xx without Retry-After this many times in a row: split the batch (see _deliver).
        self.server_error_tries = max(1, server_error_tries)
        self.on_fleet = on_fleet
        self.buffer: deque[Recorded | dict[str, Any]] = deque()
        self.in_flight = 0  # events taken from the buffer and not yet acknowledged
        self.thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._flush_requested = False
        self._woken = False  # a full batch has woken the sender since it last took one
        self._drop_report: tuple[str, int] | None = None  # (id, count) resent until acknowledged
        self._empty_batch = encode({"worker_id": worker_id, "events": []})

    # -- the agent's side (never blocks on the network) --------------------------------------

    def emit(self, event: dict[str, Any]) -> None:
        """Buffer `event` (without id and ts: the sender thread adds them)."""
        self.append((time.time(), event))

    def append(self, item: Recorded) -> None:
        # Without the lock: a deque's append is atomic, and the sender only ever takes from the
        # front under the lock, so the bound is approximate by the few threads recording at
        # once. A full batch wakes the sender once; it re-arms that when it takes a batch, so
        # while it backs off, recording stays lock-free.
        buffer = self.buffer
        if len(buffer) + self.in_flight < self.max_buffer:
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
            events = [materialize(self.buffer.popleft()) for _ in range(len(self.buffer))]
            self.buffer.extendleft(reversed(events))
        return events

    def pending(self) -> int:
        """Events buffered or in flight."""
        return len(self.buffer) + self.in_flight

    def start(self, stopping: threading.Event) -> None:
        # The thread holds a weak reference, so a sender nobody uses can still be collected.
        self.thread = threading.Thread(
            target=_send_loop,
            args=(weakref.ref(self), stopping),
            name="breakers-sender",
            daemon=True,
        )
        self.thread.start()

    def flush(self, timeout: float) -> bool:
        """Send everything buffered now; True if it was all acknowledged within ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._wake:
            self._flush_requested = True
            self._wake.notify_all()
            while self.buffer or self.in_flight:
                left = deadline - time.monotonic()
                if left <= 0 or self.thread is None or not self.thread.is_alive():
                    return False
                self._wake.wait(min(left, 0.05))
            return True

    def wake(self) -> None:
        with self._wake:
            self._wake.notify_all()

    # -- the sender thread ------------------------------------------------------------------

    def _next_batch(self, stopping: threading.Event) -> list[dict[str, Any]] | None:
        """Wait until a batch is due; take it out of the buffer (None: stop)."""
        with self._wake:
            first_seen: float | None = None
            while True:
                if self.buffer or self._drop_report or self.stats.dropped > self._reported():
                    if first_seen is None:
                        first_seen = time.monotonic()
                    due = (
                        len(self.buffer) >= self.batch_size
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
            count = min(self.max_batch_size, len(self.buffer))
            taken = [self.buffer.popleft() for _ in range(count)]
            self.in_flight = count
            self._woken = False
            if self._drop_report is None and self.stats.dropped > self._reported():
                self._drop_report = (process_ids.new(), self.stats.dropped - self._reported())
        return [materialize(item) for item in taken]  # outside the lock the agent appends under

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
            status, headers, reply = self.transport.request("POST", EVENTS_PATH, self._body(events))
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
            delay = self.backoff.delay(failures, headers)
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
        return encode(body)

    def _takes_batches(self) -> bool:
        """Does the control plane take a batch at all right now (an empty one)? Tells an event
        it cannot take from a control plane that is down behind a proxy answering 502.

        The empty batch carries the drop report when one is due, like the failing batch did:
        if only the report is what the server cannot take, the report is given up (logged)
        rather than every event that would carry it, and False lets the event be tried again.
        """
        status, _, reply = self.transport.request("POST", EVENTS_PATH, self._body([]))
        if status == 200:
            self._acknowledge(reply)  # the drop report, if any, is now reported
            return True
        report = self._drop_report
        if report is None or _classify(status, {}) is not _Answer.SERVER_ERROR:
            return False
        bare, _, _ = self.transport.request("POST", EVENTS_PATH, self._empty_batch)
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
            self.on_fleet(fleet)

    def _finish_batch(self, done: int | None = None, dropped: int = 0) -> None:
        """``done`` events in flight are over (all of them by default), ``dropped`` of them lost."""
        with self._wake:
            self.in_flight = 0 if done is None else max(0, self.in_flight - done)
            self.stats.dropped += dropped
            self._wake.notify_all()

    def _requeue_front(self, events: list[dict[str, Any]]) -> None:
        with self._wake:
            self.buffer.extendleft(reversed(events))
            self.in_flight = max(0, self.in_flight - len(events))


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


# The background loop must outlive any bug or surprise in one round: a dead sender would leave
# every later event in the buffer. An unexpected exception is logged with its traceback,
# counted, and the loop goes on after a backoff (growing while the exceptions repeat).


def _send_loop(ref: Callable[[], EventSender | None], stopping: threading.Event) -> None:
    errors = 0
    while True:
        sender = ref()
        if sender is None:
            return
        try:
            batch = sender._next_batch(stopping)
            if batch is None or not sender._deliver(batch, stopping):
                return
            errors = 0
        except Exception:
            errors += 1
            sender.stats.loop_errors += 1
            # The batch may be what breaks the round: count what is still in flight as dropped
            # rather than retry it forever, and keep flush() from waiting on it.
            with sender._lock:
                lost = sender.in_flight
            logger.exception("the event sender failed; %d events dropped, carrying on", lost)
            sender._finish_batch(dropped=lost)
            delay = sender.backoff.delay(errors, {})
            del sender
            if stopping.wait(delay):
                return
            continue
        del sender
