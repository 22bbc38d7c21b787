"""Hypothesis stateful test: the Redis scripts follow the reference model step for step.

Random sequences of outcomes (from several workers, some resent), batches, ticks, time jumps,
trial leases, probes and operator actions run against both ``reference_model.FleetBreaker`` and
the real Redis store; after every step the returned transitions and the whole stored state must
agree.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from breaker_panel.core import Outcome, State
from breakers.fleet.rules import (
    AGENT_HOLDER_PREFIX,
    PROBE_HOLDER,
    FleetPolicy,
    Forced,
    NotForcedError,
    OperatorActionKind,
    Transition,
    TrialMode,
)
from breakers.fleet.store import (
    FleetStore,
    PolicyOverrides,
    ToolState,
    TrackedTransition,
)
from breakers.fleet_service import fleet_store
from scripts.testing.fleet_calls import fleet_call
from tests.fleet.reference_model import FleetBreaker

WORKERS = st.sampled_from(["w1", "w2", "w3", "t1/a", "t1/b"])
# Who a worker votes as: two workers ("t1/a", "t1/b") share one unbound token, one voter but
# two trial-lease holders (runs.ingest_fleet.fleet_lease_holder).
VOTER = {"w1": "w1", "w2": "w2", "w3": "w3", "t1/a": "t1", "t1/b": "t1"}
OUTCOMES = st.sampled_from(
    [Outcome.RETRYABLE, Outcome.RETRYABLE, Outcome.RETRYABLE, Outcome.SUCCESS, Outcome.SEMANTIC]
)


def _comparable(transitions: list[Transition]) -> list[dict[str, Any]]:
    return [
        {
            "seq": t.seq,
            "at": t.at,
            "from": t.from_state,
            "to": t.to_state,
            "auto_from": t.auto_from,
            "auto_to": t.auto_to,
            "forced": t.forced,
            "kind": t.kind,
            "cause": t.cause,
            "reason": t.reason,
        }
        for t in transitions
    ]


def _unwrap(tracked: list[TrackedTransition]) -> list[Transition]:
    return [item.transition for item in tracked]


class FleetRulesMatchRedis(RuleBasedStateMachine):
    store: FleetStore

    def __init__(self) -> None:
        super().__init__()
        self.store = fleet_store()
        self.tool = f"hyp-{uuid.uuid4().hex[:10]}"
        self.model = FleetBreaker()
        self.now = 1_000_000
        self.event_ids: list[str] = []
        self.probe_tokens: list[str] = ["never-granted"]

    @initialize(
        threshold=st.integers(1, 4),
        min_workers=st.integers(1, 3),
        cooldown=st.integers(1, 5).map(lambda s: s * 1000),
        cap_factor=st.sampled_from([1, 2, 4]),
        trial=st.sampled_from(TrialMode),
    )
    def set_policy(
        self, threshold: int, min_workers: int, cooldown: int, cap_factor: int, trial: TrialMode
    ) -> None:
        self.policy = FleetPolicy(threshold, cooldown, cooldown * cap_factor, min_workers, trial)
        overrides = PolicyOverrides(threshold, min_workers, cooldown, cooldown * cap_factor, trial)
        empty = ToolState(auto=State.CLOSED, forced=Forced.NONE)
        assert self.store.restore(self.tool, empty, overrides)

    def teardown(self) -> None:
        keys = list(self.store.client.scan_iter(match=f"bp:{{{self.tool}}}:*", count=1000))
        if keys:
            self.store.client.delete(*keys)
        self.store.client.srem(self.store.tools_key, self.tool)

    # -- steps -----------------------------------------------------------------------------

    def _new_or_resent(self, data: st.DataObject) -> str:
        resend: bool = data.draw(st.booleans(), "resend?")
        if resend and self.event_ids:
            return data.draw(st.sampled_from(self.event_ids), "resent id")
        event_id = f"e{len(self.event_ids)}"
        self.event_ids.append(event_id)
        return event_id

    @rule(data=st.data(), size=st.integers(1, 4))
    def report_batch(self, data: st.DataObject, size: int) -> None:
        events = []
        expected: list[Transition] = []
        batch_ids: set[str] = set()
        for _ in range(size):
            event_id = self._new_or_resent(data)
            if event_id in batch_ids:
                continue  # ingest refuses an id twice in one batch
            batch_ids.add(event_id)
            worker, outcome = data.draw(WORKERS, "worker"), data.draw(OUTCOMES, "outcome")
            trial = data.draw(st.booleans(), "trial")
            voter = VOTER[worker]
            events.append(
                fleet_call(event_id, self.tool, voter, outcome.value, trial=trial, holder=worker)
            )
            change = self.model.apply(
                event_id=event_id,
                worker=voter,
                outcome=outcome,
                now=self.now,
                policy=self.policy,
                trial=trial,
                holder=worker,
            )
            if change is not None:
                expected.append(change)
        result = self.store.apply(self.tool, events, now=self.now)
        assert _comparable(_unwrap(result.transitions)) == _comparable(expected)

    @rule(seconds=st.sampled_from([0.001, 0.5, 1, 2, 5, 30]))
    def time_passes(self, seconds: float) -> None:
        self.now += round(seconds * 1000)

    @rule()
    def tick(self) -> None:
        change = self.model.advance(now=self.now, policy=self.policy)
        tracked, _, trial = self.store.advance(self.tool, now=self.now)
        assert trial == self.policy.trial
        assert _comparable(_unwrap(tracked)) == _comparable([change] if change else [])

    @rule(worker=WORKERS, ttl=st.sampled_from([500, 3000]))
    def agent_asks_for_the_trial(self, worker: str, ttl: int) -> None:
        grant = self.store.acquire(
            self.tool, holder=AGENT_HOLDER_PREFIX + worker, ttl_ms=ttl, now=self.now
        )
        expected = self.model.acquire_trial(
            holder=AGENT_HOLDER_PREFIX + worker,
            token=grant.token,
            now=self.now,
            ttl_ms=ttl,
            policy=self.policy,
        )
        assert grant.granted == expected

    @rule(stale=st.booleans(), ttl=st.sampled_from([500, 3000]))
    def probe_asks_for_the_trial(self, stale: bool, ttl: int) -> None:
        window = self.model.window - 1 if stale else self.model.window
        grant = self.store.acquire(
            self.tool, holder=PROBE_HOLDER, ttl_ms=ttl, now=self.now, window=window
        )
        expected = self.model.acquire_trial(
            holder=PROBE_HOLDER,
            token=grant.token,
            now=self.now,
            ttl_ms=ttl,
            policy=self.policy,
            window=window,
        )
        assert grant.granted == expected
        if grant.granted:
            self.probe_tokens.append(grant.token)

    @precondition(lambda self: self.model.lease_holder.startswith(AGENT_HOLDER_PREFIX))
    @rule(outcome=OUTCOMES, trial=st.booleans())
    def trial_holder_reports(self, outcome: Outcome, trial: bool) -> None:
        # The holder's trial call, or (trial=False) a late result of a call it started before.
        worker = self.model.lease_holder.removeprefix(AGENT_HOLDER_PREFIX)
        event_id = f"e{len(self.event_ids)}"
        self.event_ids.append(event_id)
        voter = VOTER[worker]
        change = self.model.apply(
            event_id=event_id,
            worker=voter,
            outcome=outcome,
            now=self.now,
            policy=self.policy,
            trial=trial,
            holder=worker,
        )
        call = fleet_call(event_id, self.tool, voter, outcome.value, trial=trial, holder=worker)
        result = self.store.apply(self.tool, [call], now=self.now)
        assert _comparable(_unwrap(result.transitions)) == _comparable([change] if change else [])

    @rule(data=st.data(), ok=st.booleans(), latest=st.booleans())
    def probe_reports(self, data: st.DataObject, ok: bool, latest: bool) -> None:
        tokens = self.probe_tokens
        token = tokens[-1] if latest else data.draw(st.sampled_from(tokens), "token")
        change = self.model.finish_probe(token=token, ok=ok, now=self.now, policy=self.policy)
        tracked = self.store.finish_probe(self.tool, token=token, ok=ok, now=self.now)
        assert _comparable(_unwrap(tracked)) == _comparable([change] if change else [])

    @rule(action=st.sampled_from(OperatorActionKind), reason=st.sampled_from(["x", "vendör ✓"]))
    def operator_acts(self, action: OperatorActionKind, reason: str) -> None:
        result = self.store.operate(self.tool, action=action, reason=reason, now=self.now)
        try:
            change = self.model.operate(
                action=action, reason=reason, now=self.now, policy=self.policy
            )
        except NotForcedError:
            assert result is None
            return
        assert result is not None
        assert _comparable(_unwrap(result.transitions)) == _comparable([change] if change else [])

    @precondition(lambda self: self.model.auto is State.OPEN)
    @rule()
    def jump_past_the_cooldown(self) -> None:
        self.now = max(self.now, self.model.open_until)

    # -- the whole state agrees after every step --------------------------------------------

    @invariant()
    def stored_state_matches_the_model(self) -> None:
        details = self.store.details(self.tool)
        stored, m = details.state, self.model
        assert stored is not None
        assert stored.auto is m.auto
        assert stored.forced is m.forced
        assert stored.consecutive == m.consecutive
        assert details.workers == m.workers
        assert details.streak == m.streak
        assert stored.cooldown_ms == m.cooldown_ms
        assert stored.open_until == m.open_until
        assert stored.window == m.window
        assert stored.lease_holder == m.lease_holder
        assert stored.lease_until == m.lease_until
        assert stored.seq == m.seq
        assert stored.since == m.since
        assert (stored.auto_reason, stored.forced_reason) == (m.auto_reason, m.forced_reason)


FleetRulesMatchRedis.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.usefixtures("fleet_redis")
class TestFleetRulesMatchRedis(FleetRulesMatchRedis.TestCase):  # type: ignore[name-defined,misc,valid-type]
    pass
