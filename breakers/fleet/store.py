"""The fleet breakers in Redis: every rule as one atomic Lua script per call (the reference model
in ``tests/fleet/reference_model.py`` states the same rules in Python).

Keys of one tool share the hash tag ``{<tool>}`` so each script touches a single slot and runs
unchanged on Redis Cluster; the tool name is percent-encoded inside the tag so that no name can
reach into another tool's keys. Two keys are global and only ever used by plain commands: the set
of tool names, and the *generation*, written when the state was last rebuilt from the database
(its absence means Redis lost its data). Time is passed in by the caller (integer ms).

No Django here: the store takes a ready client (``services.fleet_store()`` builds it from
settings with socket timeouts), so the same code runs in tests, benchmarks and production.
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from breaker_panel.core import State
from breakers.fleet.rules import (
    CauseKind,
    FleetPolicy,
    Forced,
    OperatorActionKind,
    Transition,
    TrialMode,
    effective_state,
)
from runs.fleet_interface import AcceptedToolCall

__all__ = [
    "AcquireResult",
    "ApplyResult",
    "FleetStore",
    "LiveTool",
    "Missing",
    "OperateResult",
    "PolicyOverrides",
    "RunSpend",
    "SpendResult",
    "ToolDetails",
    "ToolState",
    "TrackedTransition",
    "as_int",
    "redis_client",
]

_LUA = Path(__file__).with_name("lua")
# What the snapshot reads of each tool: the agents' view plus what Celery's tick needs.
_STATE_FIELDS = (
    "seq",  # first: its absence means the tool has no state here
    "auto",
    "forced",
    "since",
    "ar",
    "fr",
    "p_trial",
    "window",
    "open_until",
    "lu",
    "changed_at",
    "cooldown",
    "consec",
    "lh",
)


def redis_client(url: str, *, timeout: float) -> redis.Redis:
    """A client whose every call is bounded: connect and read timeouts, one immediate retry.

    redis-py 8's default retries ten times with jittered exponential backoff, which would stretch a
    hung Redis to many times the timeout; one retry is enough to get past a pooled connection that a
    restarted Redis closed.
    """
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 1),
        health_check_interval=30,
    )


def as_int(value: str | bytes | float | None) -> int:
    """A number field of a tool's hash as an int; never raises.

    Lua writes a number beyond 1e14 in exponent form (``1e+18``, what an unbounded cooldown once
    made), which ``int()`` refuses; anything unreadable counts as 0 (unset) so that one damaged
    hash cannot stop the readers of every tool.
    """
    if value is None or value == "" or value == b"":
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        pass
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0
    return int(number) if math.isfinite(number) else 0


@cache
def _script_source(name: str) -> str:
    return (_LUA / "prelude.lua").read_text() + "\n" + (_LUA / f"{name}.lua").read_text()


# The spend rule (breakers/fleet/lua/spend*.lua): a run's model calls are kept this long, the
# longest window a policy may set (``POLICY_BOUNDS["spend_window_seconds"]``), and so is the
# record of which of its tools failed; a tool keeps at most this many model calls in its window.
SPEND_LOG_MS = 3_600_000
SPEND_ENTRIES_KEPT = 5_000


@dataclass(frozen=True, slots=True)
class RunSpend:
    """What one batch says about one run, for the spend rule: its model calls (event key, ms,
    micro-USD) and its tool outcomes (tool, succeeded), each in the batch's order."""

    voter: str
    model_calls: list[tuple[str, int, int]]
    tool_outcomes: list[tuple[str, bool]]


@dataclass(frozen=True, slots=True)
class SpendResult:
    """A tool's spend rule after a batch: the spend counted in its window (micro-USD), from how
    many voters, and the opening if it reached the amount."""

    spend_micro: int
    workers: int
    transitions: list[TrackedTransition]


@dataclass(frozen=True, slots=True)
class ToolState:
    """One tool's breaker as Redis holds it (times in ms since the epoch)."""

    auto: State
    forced: Forced
    consecutive: int = 0
    cooldown_ms: int = 0
    open_until: int = 0
    window: int = 0
    lease_holder: str = ""
    lease_token: str = ""
    lease_until: int = 0
    seq: int = 0
    since: int = 0
    auto_reason: str = ""
    forced_reason: str = ""
    trial: str = ""  # the tool's own trial mode; "" means the store's default
    changed_at: int = 0  # when Redis last changed it (reconciling lost transitions)

    @property
    def state(self) -> State:
        return effective_state(self.auto, self.forced)

    @property
    def reason(self) -> str:
        return self.forced_reason if self.forced else self.auto_reason

    @classmethod
    def from_script(cls, data: Mapping[str, Any]) -> ToolState:
        return cls(
            auto=State(data["auto"]),
            forced=Forced(data["forced"]),
            consecutive=int(data["consecutive"]),
            cooldown_ms=int(data["cooldown_ms"]),
            open_until=int(data["open_until"]),
            window=int(data["window"]),
            lease_holder=data["lease_holder"],
            lease_token=data["lease_token"],
            lease_until=int(data["lease_until"]),
            seq=int(data["seq"]),
            since=int(data["since"]),
            auto_reason=data["auto_reason"],
            forced_reason=data["forced_reason"],
        )

    @classmethod
    def from_hash(cls, fields: Mapping[str, str]) -> ToolState:
        """From the raw fields of the state hash (a snapshot row or ``details()``)."""

        def number(name: str) -> int:
            return as_int(fields.get(name))

        return cls(
            auto=_member(State, fields.get("auto"), State.CLOSED),
            forced=_member(Forced, fields.get("forced"), Forced.NONE),
            consecutive=number("consec"),
            cooldown_ms=number("cooldown"),
            open_until=number("open_until"),
            window=number("window"),
            lease_holder=fields.get("lh", ""),
            lease_until=number("lu"),
            seq=number("seq"),
            since=number("since"),
            auto_reason=fields.get("ar", ""),
            forced_reason=fields.get("fr", ""),
            trial=fields.get("p_trial", ""),
            changed_at=number("changed_at"),
        )

    def saved_fields(self) -> dict[str, Any]:
        """The hash fields ``restore`` writes: the state, no counters and no lease."""
        return {
            "seq": self.seq,
            "auto": self.auto.value,
            "forced": self.forced.value,
            "since": self.since,
            "ar": self.auto_reason,
            "fr": self.forced_reason,
            "cooldown": self.cooldown_ms,
            "open_until": self.open_until,
            "window": self.window,
            "consec": 0,
            "lh": "",
            "lt": "",
            "lu": 0,
        }

    def as_json(self) -> dict[str, Any]:
        """For audit rows (before/after): the state without the lease token, a capability."""
        return {
            "state": self.state.value,
            "auto": self.auto.value,
            "forced": self.forced.value,
            "consecutive": self.consecutive,
            "cooldown_ms": self.cooldown_ms,
            "open_until": self.open_until,
            "window": self.window,
            "lease_holder": self.lease_holder,
            "seq": self.seq,
            "since": self.since,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class PolicyOverrides:
    """A tool's own policy; None keeps the store's default (the settings)."""

    threshold: int | None = None
    min_workers: int | None = None
    cooldown_ms: int | None = None
    max_cooldown_ms: int | None = None
    trial: TrialMode | None = None
    spend_amount_micro: int | None = None  # 0: the spend rule is off for this tool
    spend_window_ms: int | None = None

    def fields(self) -> dict[str, Any]:
        return {
            "p_threshold": self.threshold,
            "p_min_workers": self.min_workers,
            "p_cooldown": self.cooldown_ms,
            "p_max_cooldown": self.max_cooldown_ms,
            "p_trial": None if self.trial is None else self.trial.value,
            "p_spend_amount": self.spend_amount_micro,
            "p_spend_window": self.spend_window_ms,
        }

    @classmethod
    def from_hash(cls, fields: Mapping[str, str]) -> PolicyOverrides:
        def number(name: str) -> int | None:
            return as_int(fields[name]) if fields.get(name) else None

        trial = fields.get("p_trial")
        return cls(
            threshold=number("p_threshold"),
            min_workers=number("p_min_workers"),
            cooldown_ms=number("p_cooldown"),
            max_cooldown_ms=number("p_max_cooldown"),
            trial=TrialMode(trial) if trial else None,
            spend_amount_micro=number("p_spend_amount"),
            spend_window_ms=number("p_spend_window"),
        )


@dataclass(frozen=True, slots=True)
class ToolDetails:
    """One tool's state (None when Redis has none), its streak's failures per worker and ids."""

    state: ToolState | None
    workers: dict[str, int]
    streak: list[str]
    policy: PolicyOverrides = PolicyOverrides()
    # The spend rule's count as of the last batch that touched it (micro-USD, voters).
    spend_micro: int = 0
    spend_workers: int = 0


@dataclass(frozen=True, slots=True)
class LiveTool:
    state: ToolState
    workers: dict[str, int]  # the streak's failures per worker


@dataclass(frozen=True, slots=True)
class TrackedTransition:
    """A transition and the tool's whole state right after it (what the database mirrors)."""

    transition: Transition
    after: ToolState

    @classmethod
    def from_script(cls, data: Mapping[str, Any]) -> TrackedTransition:
        transition = Transition(
            seq=int(data["seq"]),
            at=int(data["at"]),
            from_state=State(data["from_state"]),
            to_state=State(data["to_state"]),
            auto_from=State(data["auto_from"]),
            auto_to=State(data["auto_to"]),
            forced=Forced(data["forced"]),
            kind=CauseKind(data["kind"]),
            cause=dict(data["cause"] or {}),
            reason=data["reason"],
        )
        return cls(transition, ToolState.from_script(data["state"]))


@dataclass(frozen=True, slots=True)
class ApplyResult:
    applied: int
    duplicates: int
    transitions: list[TrackedTransition]


@dataclass(frozen=True, slots=True)
class AcquireResult:
    granted: bool
    window: int
    lease_until: int
    token: str  # the live lease's token (an agent asking again gets its own back)


@dataclass(frozen=True, slots=True)
class OperateResult:
    before: ToolState
    after: ToolState
    transitions: list[TrackedTransition]


class Missing(Exception):
    """The tool has no state in Redis: restore it from the database, then call again."""


class FleetStore:
    """Fleet breaker state in Redis. Every method is one round trip unless it says otherwise."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        defaults: FleetPolicy,
        prefix: str = "bp",
        dedupe_ttl_ms: int = 3_600_000,
    ) -> None:
        self.client = client
        self.defaults = defaults
        self.prefix = prefix
        self.dedupe_ttl_ms = dedupe_ttl_ms
        self.tools_key = f"{prefix}:tools"
        self.generation_key = f"{prefix}:generation"
        # Pub/sub channels are not per database: the number keeps stores on one server apart.
        pool = getattr(client, "connection_pool", None)  # a cluster has none, and database 0
        database = pool.connection_kwargs.get("db", 0) if pool is not None else 0
        self.changes_channel = f"{prefix}:fleet-changed:{database}"
        self._known_tools: list[str] = []
        self._parsed: dict[str, tuple[tuple[Any, ...], ToolState | None]] = {}
        self._scripts = {
            name: client.register_script(_script_source(name))
            for name in (
                "apply",
                "advance",
                "acquire",
                "finish_probe",
                "operate",
                "restore",
                "set_policy",
                "spend",
            )
        }
        self._spend_run = client.register_script((_LUA / "spend_run.lua").read_text())
        self.spend_tools_key = f"{prefix}:spend-tools"

    # -- keys --------------------------------------------------------------------------------

    def tool_keys(self, tool: str) -> list[str]:
        tag = f"{self.prefix}:{{{quote(tool, safe='')}}}"
        return [f"{tag}:state", f"{tag}:workers", f"{tag}:streak"]

    def spend_keys(self, tool: str) -> list[str]:
        """The spend rule's keys of a tool: counted model calls, their sum, entries per voter
        and per run (``breakers/fleet/lua/spend.lua``)."""
        tag = f"{self.prefix}:{{{quote(tool, safe='')}}}"
        return [f"{tag}:spend", f"{tag}:spend-total", f"{tag}:spend-voters", f"{tag}:spend-runs"]

    def run_spend_keys(self, run_key: str) -> list[str]:
        tag = f"{self.prefix}:{{run:{quote(run_key, safe='')}}}"
        return [f"{tag}:spend-log", f"{tag}:spend-tools"]

    def ping(self) -> None:
        """Raise ``redis.RedisError`` unless the store answers.

        Ingest asks before every batch with tool calls, so this sends PING on a pooled
        connection itself, with the client's retry (a connection a restarted Redis closed is
        dropped and the PING sent once more): the same round trip as ``client.ping()`` at a
        fraction of redis-py's per-command work (its deprecation checks and telemetry).
        """
        pool = getattr(self.client, "connection_pool", None)
        if pool is None:  # a cluster client has no single pool
            self.client.ping()
            return
        connection = pool.get_connection()
        try:
            connection.retry.call_with_retry(
                lambda: _ping(connection), lambda _error: connection.disconnect()
            )
        finally:
            pool.release(connection)

    def announce_change(self) -> None:
        """Tell every server process's long-poll watcher that a tool's state just changed, so
        it reads the fleet's ETag now instead of at its next poll (breakers/fleet_api/long_poll.py).
        Best effort: a lost message only leaves the waiters to that poll."""
        with contextlib.suppress(redis.RedisError):
            self.client.publish(self.changes_channel, b"1")

    def subscribe_to_changes(self) -> redis.client.PubSub:
        """A subscription to ``announce_change()`` (the watcher reads it; close it after)."""
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(self.changes_channel)
        return pubsub

    def dedupe_key(self, tool: str, event_id: str) -> str:
        return f"{self.prefix}:{{{quote(tool, safe='')}}}:seen:{event_id}"

    def _policy_args(self, now: int) -> list[Any]:
        d = self.defaults
        return [now, d.threshold, d.min_workers, d.cooldown_ms, d.max_cooldown_ms, d.trial.value]

    def _run(self, name: str, tool: str, now: int, *args: Any, keys: Iterable[str] = ()) -> Any:
        raw = self._scripts[name](
            keys=[*self.tool_keys(tool), *keys], args=[*self._policy_args(now), *args]
        )
        data = json.loads(raw)
        if isinstance(data, dict) and data.get("missing"):
            raise Missing(tool)
        return data

    # -- the rules ---------------------------------------------------------------------------

    def apply(self, tool: str, calls: Sequence[AcceptedToolCall], *, now: int) -> ApplyResult:
        """Apply accepted outcomes of ``tool`` (each call's own) in order; raises ``Missing``
        (nothing applied).

        The calls go as one JSON argument, not five arguments each: redis-py packs every
        argument in Python, which cost more than the rest of the call (docs/benchmarks.md).
        """
        fields: list[str | bool] = []
        keys = []
        seen = self.dedupe_key(tool, "")  # the tool's part, quoted once per batch, not per call
        for call in calls:
            fields += (call.event_id, call.worker_id, call.outcome, call.trial, call.lease_holder)
            keys.append(seen + (call.dedupe_id or call.event_id))
        data = self._run("apply", tool, now, str(self.dedupe_ttl_ms), json.dumps(fields), keys=keys)
        return ApplyResult(data["applied"], data["duplicates"], _transitions(data))

    # -- the spend rule --------------------------------------------------------------------

    def spend_enabled_tools(self) -> set[str] | None:
        """The tools whose spend rule is on: None for all (the default amount is set), else
        those whose own policy sets an amount (one round trip)."""
        if self.defaults.spend_amount_micro > 0:
            return None
        return {
            _text(name) for name in cast(set[bytes], self.client.smembers(self.spend_tools_key))
        }

    def spend_runs(
        self, runs: Mapping[str, RunSpend], *, now: int
    ) -> dict[str, list[tuple[str, str, bool, list[Any]]]]:
        """Record each run's model calls and tool outcomes (one pipelined script per run, one
        round trip): per tool, what changes in its spend, as ``spend_apply`` takes it."""
        pipe = self.client.pipeline(transaction=False)
        for run_key, run in runs.items():
            batch = {"m": run.model_calls, "t": run.tool_outcomes}
            self._spend_run(
                keys=self.run_spend_keys(run_key),
                args=[now, now - SPEND_LOG_MS, SPEND_LOG_MS, json.dumps(batch)],
                client=pipe,
            )
        ops: dict[str, list[tuple[str, str, bool, list[Any]]]] = {}
        for (run_key, run), raw in zip(runs.items(), pipe.execute(), strict=True):
            for tool, change in json.loads(raw).items():
                ops.setdefault(tool, []).append(
                    (run_key, run.voter, bool(change.get("drop")), change.get("add") or [])
                )
        return ops

    def spend_apply(
        self,
        tool: str,
        ops: Sequence[tuple[str, str, bool, list[Any]]],
        *,
        now: int,
        stale_margin_ms: int,
    ) -> SpendResult:
        """Apply ``spend_runs``'s changes to one tool's spend and open it if the rule says so;
        raises ``Missing`` (nothing applied)."""
        d = self.defaults
        data = self._run(
            "spend",
            tool,
            now,
            d.spend_amount_micro,
            d.spend_window_ms,
            stale_margin_ms,
            tool,
            SPEND_ENTRIES_KEPT,
            json.dumps(ops),
            keys=self.spend_keys(tool),
        )
        return SpendResult(int(data["spend"]), int(data["workers"]), _transitions(data))

    def _mark_spend_policy(self, tool: str, policy: PolicyOverrides | None) -> None:
        # The set ``spend_enabled_tools`` reads while the default amount is 0 (off).
        if policy is not None and policy.spend_amount_micro:
            self.client.sadd(self.spend_tools_key, tool)
        else:
            self.client.srem(self.spend_tools_key, tool)

    def advance(self, tool: str, *, now: int) -> tuple[list[TrackedTransition], ToolState, str]:
        """open -> half_open if the cooldown has elapsed: (transitions, state, trial mode)."""
        data = self._run("advance", tool, now)
        return _transitions(data), ToolState.from_script(data["state"]), data["trial"]

    def acquire(
        self, tool: str, *, holder: str, ttl_ms: int, now: int, window: int | None = None
    ) -> AcquireResult:
        token = secrets.token_hex(8)
        data = self._run(
            "acquire", tool, now, holder, token, ttl_ms, "" if window is None else window
        )
        return AcquireResult(
            bool(data["granted"]), int(data["window"]), int(data["lease_until"]), data["token"]
        )

    def finish_probe(self, tool: str, *, token: str, ok: bool, now: int) -> list[TrackedTransition]:
        return _transitions(self._run("finish_probe", tool, now, token, "1" if ok else "0"))

    def operate(
        self, tool: str, *, action: OperatorActionKind, reason: str, now: int
    ) -> OperateResult | None:
        """None when the action does not apply (release of a breaker that is not forced)."""
        data = self._run("operate", tool, now, action.value, reason)
        if data.get("error") == "not_forced":
            return None
        if action is OperatorActionKind.RESET:
            self.client.delete(*self.spend_keys(tool))  # the spend rule's counters too
        return OperateResult(
            ToolState.from_script(data["before"]),
            ToolState.from_script(data["after"]),
            _transitions(data),
        )

    # -- rebuilding and policy -----------------------------------------------------------------

    def restore(self, tool: str, state: ToolState, policy: PolicyOverrides | None = None) -> bool:
        """Write a tool's saved state (and policy) unless Redis holds the same ``seq`` or newer."""
        fields = {**state.saved_fields(), **(policy.fields() if policy is not None else {})}
        args = [*self._policy_args(0), json.dumps(fields)]
        written = self._scripts["restore"](keys=self.tool_keys(tool), args=args)
        self.client.sadd(self.tools_key, tool)
        self._mark_spend_policy(tool, policy)
        return bool(written)

    def set_policy(self, tool: str, policy: PolicyOverrides) -> bool:
        """Replace the tool's own policy; False when the tool has no state here."""
        args = [*self._policy_args(0), json.dumps(policy.fields())]
        self._mark_spend_policy(tool, policy)
        return bool(self._scripts["set_policy"](keys=self.tool_keys(tool), args=args))

    def generation(self) -> str | None:
        value = self.client.get(self.generation_key)
        return None if value is None else _text(value)

    def start_generation(self) -> str:
        """Mark the state as rebuilt; the first rebuilder's generation wins."""
        self.client.set(self.generation_key, secrets.token_hex(6), nx=True)
        return self.generation() or ""

    # -- reading -------------------------------------------------------------------------------

    def tools(self) -> list[str]:
        return sorted(
            _text(name) for name in cast(set[bytes], self.client.smembers(self.tools_key))
        )

    def snapshot(self) -> tuple[str | None, dict[str, ToolState]]:
        """(generation, state per tool) in one round trip, whatever the tool count.

        The tools' fields are read together with the set of names, for the names this process
        saw last time; a second round trip fetches only tools that are new since then.
        """
        known = self._known_tools
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self.generation_key)
        pipe.smembers(self.tools_key)
        for tool in known:
            pipe.hmget(self.tool_keys(tool)[0], _STATE_FIELDS)
        generation, names, *rows = pipe.execute()
        tools = sorted(_text(name) for name in names)
        fetched = dict(zip(known, rows, strict=True))
        new = [tool for tool in tools if tool not in fetched]
        if new:
            pipe = self.client.pipeline(transaction=False)
            for tool in new:
                pipe.hmget(self.tool_keys(tool)[0], _STATE_FIELDS)
            fetched.update(zip(new, pipe.execute(), strict=True))
        self._known_tools = tools  # replaced, never mutated: other threads read it freely
        # A tool's fields usually read the same as last time (ingest asks after every batch):
        # then its parsed state is reused (it is immutable) rather than parsed again.
        parsed = self._parsed
        kept: dict[str, tuple[tuple[Any, ...], ToolState | None]] = {}
        states: dict[str, ToolState] = {}
        for tool in tools:
            raw = tuple(fetched[tool])
            last = parsed.get(tool)
            state = last[1] if last is not None and last[0] == raw else _state_of(raw)
            kept[tool] = (raw, state)
            if state is not None:
                states[tool] = state
        self._parsed = kept  # replaced, never mutated, like _known_tools
        return (None if generation is None else _text(generation)), states

    def live(self, tools: Sequence[str]) -> tuple[str | None, dict[str, LiveTool]]:
        """(generation, state and streak workers of each tool Redis has) in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self.generation_key)
        for tool in tools:
            state_key, workers_key, _ = self.tool_keys(tool)
            pipe.hmget(state_key, _STATE_FIELDS)
            pipe.hgetall(workers_key)
        generation, *replies = pipe.execute()
        live: dict[str, LiveTool] = {}
        for index, tool in enumerate(tools):
            state = _state_of(replies[2 * index])
            if state is not None:
                live[tool] = LiveTool(state, _counts(replies[2 * index + 1]))
        return (None if generation is None else _text(generation)), live

    def details(self, tool: str) -> ToolDetails:
        """The state, the streak's failures per worker and its event ids (one MULTI)."""
        state_key, workers_key, streak_key = self.tool_keys(tool)
        _, total_key, voters_key, _ = self.spend_keys(tool)
        pipe = self.client.pipeline(transaction=True)
        pipe.hgetall(state_key)
        pipe.hgetall(workers_key)
        pipe.lrange(streak_key, 0, -1)
        pipe.get(total_key)
        pipe.hlen(voters_key)
        raw, workers, streak, spend, spend_workers = pipe.execute()
        fields = {_text(k): _text(v) for k, v in raw.items()}
        return ToolDetails(
            ToolState.from_hash(fields) if fields else None,
            _counts(workers),
            [_text(event) for event in streak],
            PolicyOverrides.from_hash(fields),
            as_int(spend),
            int(spend_workers),
        )


def _transitions(data: Mapping[str, Any]) -> list[TrackedTransition]:
    # cjson encodes an empty Lua table as {}, so "no transitions" arrives as a dict.
    return [TrackedTransition.from_script(item) for item in data.get("transitions") or []]


# Each state enum's members by value: a dict lookup, not the enum's call, per field read.
_MEMBERS: dict[type, dict[str, Any]] = {
    kind: {member.value: member for member in kind} for kind in (State, Forced)
}


def _member[E: (State, Forced)](kind: type[E], value: str | None, default: E) -> E:
    """A state field as its enum; a damaged value reads as the default, like ``as_int``."""
    if not value:
        return default
    member: E = _MEMBERS[kind].get(value, default)
    return member


def _state_of(values: Sequence[bytes | str | None]) -> ToolState | None:
    """A ``_STATE_FIELDS`` reply; None without a seq (the hash is lost, or not restored yet)."""
    if values[0] is None:
        return None
    fields = dict(zip(_STATE_FIELDS, values, strict=True))
    return ToolState.from_hash({k: _text(v) for k, v in fields.items() if v is not None})


def _counts(hash_reply: Mapping[bytes | str, bytes | str]) -> dict[str, int]:
    return {_text(k): as_int(v) for k, v in hash_reply.items()}


def _ping(connection: Any) -> None:
    connection.send_command("PING")
    reply = connection.read_response()  # an error reply (LOADING, NOAUTH...) raises
    if reply not in (b"PONG", "PONG", True):
        raise redis.ResponseError(f"unexpected reply to PING: {reply!r}")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
