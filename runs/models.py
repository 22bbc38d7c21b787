"""What agents report: workers, runs, model calls, tool calls and run/worker-scope transitions.

Every row that comes from an event keeps the client-made event id (unique), so a resent batch is
recognised and applied once. Unique event ids are ``UniqueConstraint``s rather than ``unique=True``:
on PostgreSQL the latter adds a second ``varchar_pattern_ops`` index nobody queries, and every
index is paid for at ingest. Strings from agents are untrusted: they are stored as text, truncated
to the documented limits at ingest, and escaped wherever they are shown.
"""

from __future__ import annotations

import hashlib
import secrets
from decimal import Decimal

from django.db import models
from django.utils import timezone

from breaker_panel import vocabulary as sdk

TOKEN_PREFIX = "bp_"


def hash_token(raw: str) -> str:
    # Tokens are 256-bit random strings, so one SHA-256 is enough: no password stretching needed.
    return hashlib.sha256(raw.encode()).hexdigest()


class AgentTokenQuerySet(models.QuerySet["AgentToken"]):
    def active(self) -> AgentTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class AgentToken(models.Model):
    """A bearer token for agents (ingest, fleet state) or operators (fleet-wide actions).

    Only the hash is stored; the token is shown once, when it is created.
    """

    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    display_prefix = models.CharField(max_length=12, editable=False)
    is_operator = models.BooleanField(default=False)
    # When set, batches and trial leases with this token must name exactly this worker: one
    # token, one worker, so a token cannot make up workers to forge the fleet's quorum.
    worker_id = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = AgentTokenQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.name} ({self.display_prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @classmethod
    def issue(
        cls, *, name: str, is_operator: bool = False, worker_id: str = ""
    ) -> tuple[AgentToken, str]:
        """Create a token and return it with its raw value, which is never stored."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            name=name,
            token_hash=hash_token(raw),
            display_prefix=raw[:10],
            is_operator=is_operator,
            worker_id=worker_id,
        )
        return token, raw


class Worker(models.Model):
    """An agent worker process, known by the ``worker_id`` it sends with each batch *and* the
    token it sends it with: event ids and run ids are unique per worker, so one token can never
    suppress or take over another token's events or runs by reusing their ids."""

    worker_id = models.CharField(max_length=200)
    # The AgentToken's pk (0 for callers inside the control plane). A plain integer rather than
    # a foreign key so that the upsert's conflict target never holds a NULL.
    token_key = models.BigIntegerField(default=0, db_default=0)
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now, db_index=True)
    # Events the worker's client had to drop (its buffer was full while the control plane was
    # unreachable), as it reported them once it could: what the dashboard cannot show.
    dropped_events = models.PositiveBigIntegerField(default=0, db_default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["token_key", "worker_id"], name="worker_token_id_uniq")
        ]

    def __str__(self) -> str:
        return self.worker_id


class RunStatus(models.TextChoices):
    RUNNING = "running"  # the server's own: how a run ends is the SDK's word
    COMPLETED = sdk.RunStatus.COMPLETED.value
    FAILED = sdk.RunStatus.FAILED.value
    CANCELLED = sdk.RunStatus.CANCELLED.value


class RunSource(models.TextChoices):
    """Where a run's data came from: our SDK's events or OpenTelemetry spans (issue 15)."""

    SDK = "sdk", "SDK"
    OTLP = "otlp", "OTLP"


class Run(models.Model):
    """One agent run. Totals (spend, calls) are kept on the row so lists and charts stay cheap."""

    run_id = models.CharField(max_length=200)
    agent = models.CharField(max_length=200)
    # Covered by run_worker_started_idx; a second single-column index would only slow inserts.
    worker = models.ForeignKey(
        Worker, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    step_budget = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=RunStatus, default=RunStatus.RUNNING)
    degraded = models.BooleanField(default=False)
    steps = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveBigIntegerField(null=True, blank=True)
    model_calls = models.PositiveIntegerField(default=0)
    model_spend_usd = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    # Parts of input_tokens read from and written to the provider's prompt cache, and the input
    # tokens of the calls that said how much of their input was cached (the cached share's
    # denominator: a call that reported no cache counts says nothing about caching).
    cache_read_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    cache_write_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    cache_input_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    # Model calls whose price is unknown (no cost sent, and tokens unusable or a model the
    # price table does not know): the run's spend is then a lower bound, and the page says so.
    unpriced_calls = models.PositiveIntegerField(default=0, db_default=0)
    tool_calls = models.PositiveIntegerField(default=0)
    tool_attempts = models.PositiveIntegerField(default=0)
    tool_failures = models.PositiveIntegerField(default=0)
    # Set by the OTLP receiver (runs/otlp/receiver.py); db_default so the ingest's own INSERT
    # needs no new column.
    source = models.CharField(
        max_length=10, choices=RunSource, default=RunSource.SDK, db_default="sdk"
    )
    # Some model spans had tokens but no cost: their cost comes from the genai-prices table.
    cost_estimated = models.BooleanField(default=False, db_default=False)
    conversation_id = models.CharField(max_length=200, blank=True, default="", db_default="")

    class Meta:
        indexes = [
            models.Index(fields=["started_at"], name="run_started_idx"),
            models.Index(fields=["worker", "started_at"], name="run_worker_started_idx"),
            models.Index(fields=["status", "started_at"], name="run_status_started_idx"),
            models.Index(fields=["agent", "started_at"], name="run_agent_started_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["worker", "run_id"], name="run_worker_run_id_uniq")
        ]

    def __str__(self) -> str:
        return self.run_id

    @property
    def cached_share(self) -> float | None:
        """Share of input tokens read from the prompt cache, over the calls that said."""
        if not self.cache_input_tokens:
            return None
        return self.cache_read_tokens / self.cache_input_tokens


class CostSource(models.TextChoices):
    """Where a model call's cost came from."""

    REPORTED = "reported"  # the agent sent cost_usd
    TABLE = "table"  # priced from its tokens with the genai-prices table (runs.pricing)
    UNKNOWN = "unknown"  # no cost sent and none could be worked out: stored as 0, marked


class ModelCall(models.Model):
    event_id = models.CharField(max_length=200)
    # Covered by modelcall_run_ts_idx.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="model_call_rows", db_index=False
    )
    ts = models.DateTimeField()
    step = models.PositiveIntegerField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    # None: the call did not say (JSON null or absent); parts of input_tokens when given.
    cache_read_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_write_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    cost_source = models.CharField(
        max_length=10, choices=CostSource, default=CostSource.REPORTED, db_default="reported"
    )
    # Why the call's token counts or price cannot be trusted ("" when they can): shown on the
    # run's page beside the call. Token counts of such a call are stored as 0.
    problem = models.TextField(blank=True, default="", db_default="")
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        indexes = [
            # A run's page reads its calls in time order: (run, ts) serves that and every lookup
            # by run (cascades, per-run aggregates) that (run, step) served.
            models.Index(fields=["run", "ts"], name="modelcall_run_ts_idx"),
            models.Index(fields=["ts"], name="modelcall_ts_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["run", "event_id"], name="modelcall_run_event_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.model or 'model'} call at step {self.step}"


class Outcome(models.TextChoices):
    """Tool call outcomes (contract), spelt once in the SDK."""

    SUCCESS = sdk.Outcome.SUCCESS.value
    RETRYABLE = sdk.Outcome.RETRYABLE.value
    SEMANTIC = sdk.Outcome.SEMANTIC.value
    DEGRADED = sdk.Outcome.DEGRADED.value
    BLOCKED = sdk.Outcome.BLOCKED.value


# The outcomes the consecutive-failure rule counts: a call that found the tool failing.
FAILED_OUTCOMES = (Outcome.RETRYABLE, Outcome.DEGRADED)


class ToolCall(models.Model):
    """One exhausted tool call: however many HTTP attempts it made, it is one event."""

    event_id = models.CharField(max_length=200)
    # Both covered by the composite indexes below (run, ts) and (worker, ts).
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="tool_call_rows", db_index=False
    )
    worker = models.ForeignKey(
        Worker, on_delete=models.PROTECT, related_name="tool_calls", db_index=False
    )
    ts = models.DateTimeField()
    step = models.PositiveIntegerField(null=True, blank=True)
    tool = models.CharField(max_length=200)
    outcome = models.CharField(max_length=20, choices=Outcome)
    attempts = models.PositiveIntegerField(default=1)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["tool", "ts"], name="toolcall_tool_ts_idx"),
            models.Index(fields=["run", "ts"], name="toolcall_run_ts_idx"),
            models.Index(fields=["worker", "ts"], name="toolcall_worker_ts_idx"),
            models.Index(fields=["ts"], name="toolcall_ts_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["worker", "event_id"], name="toolcall_worker_event_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} {self.outcome} at step {self.step}"


class Scope(models.TextChoices):
    RUN = sdk.Scope.RUN.value
    WORKER = sdk.Scope.WORKER.value
    FLEET = sdk.Scope.FLEET.value


class BreakerState(models.TextChoices):
    """Breaker states (contract), spelt once in the SDK."""

    CLOSED = sdk.State.CLOSED.value
    OPEN = sdk.State.OPEN.value
    HALF_OPEN = sdk.State.HALF_OPEN.value
    FORCED_OPEN = sdk.State.FORCED_OPEN.value
    FORCED_CLOSED = sdk.State.FORCED_CLOSED.value


class ReportedTransition(models.Model):
    """A run- or worker-scope breaker transition, as an agent reported it."""

    event_id = models.CharField(max_length=200)
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, null=True, blank=True, related_name="transitions"
    )
    # Covered by reported_worker_tool_ts_idx.
    worker = models.ForeignKey(
        Worker, on_delete=models.PROTECT, related_name="transitions", db_index=False
    )
    ts = models.DateTimeField()
    scope = models.CharField(max_length=10, choices=Scope)
    tool = models.CharField(max_length=200)
    state = models.CharField(max_length=20, choices=BreakerState)
    reason = models.TextField(blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["tool", "ts"], name="reported_tool_ts_idx"),
            models.Index(fields=["worker", "tool", "ts"], name="reported_worker_tool_ts_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["worker", "event_id"], name="reported_worker_event_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope} breaker for {self.tool}: {self.state}"


class IngestedEvent(models.Model):
    """The dedupe ledger: one row per accepted event id, written in the same transaction as its
    effects, so a resent batch is recognised even for events that leave no row of their own
    (``run.started``, ``run.finished``). Its key is ``"<worker pk>:<event id>"``: ids are unique
    per worker, not across the fleet."""

    event_id = models.CharField(max_length=230, primary_key=True)
    # Never queried by worker: the ledger is only looked up by event id.
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="+", db_index=False)
    received_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return self.event_id


class FleetBacklog(models.Model):
    """Accepted tool calls whose fleet update failed after their batch committed (Redis went
    away between the two). Celery's fleet tick applies and deletes them; rare and short-lived."""

    created_at = models.DateTimeField(default=timezone.now)
    calls = models.JSONField()

    def __str__(self) -> str:
        return f"{len(self.calls)} tool calls waiting since {self.created_at:%H:%M:%S}"


class OutageReplay(models.Model):
    """One breaker mode of one ``simulate_outage`` replay (issue 7).

    Its runs are ordinary runs sent through the real ingest by workers whose ids start with
    ``worker_prefix``; times are real (compressed) times, ``speed`` converts them back to the
    story's. ``summary`` holds the figures the command printed, in simulated seconds. ``pauses``
    lists when the replay's clock stood still, as ``[start, end]`` Unix seconds (wall clock):
    the runs' timestamps include that time, the story's clock does not.
    """

    mode = models.CharField(max_length=20)
    speed = models.FloatField()
    worker_prefix = models.CharField(max_length=100, unique=True)
    started_at = models.DateTimeField(default=timezone.now)
    outage_started_at = models.DateTimeField()
    outage_ended_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    scenario = models.JSONField(default=dict)
    summary = models.JSONField(default=dict)
    pauses = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [models.Index(fields=["-started_at"], name="replay_started_idx")]

    def __str__(self) -> str:
        return f"{self.mode} replay #{self.pk}"


class WaysReplay(models.Model):
    """One ``replay_ways`` invocation (issue 26): the outage replayed with prompt caching on, per
    provider shape, mode and way of taking the tool away.

    ``rows`` grows by one play at a time as each finishes, so a stopped command leaves the plays
    it finished; ``complete`` is set only once every planned play (``planned``, as
    ``[provider, mode, way]``) was played. ``assumptions`` are the scripted model's, as the
    command printed them; ``verdicts`` are ``cheapest_ways`` over the rows so far.
    """

    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    speed = models.FloatField()
    scenario = models.JSONField(default=dict)
    assumptions = models.JSONField(default=list)
    planned = models.JSONField(default=list)
    rows = models.JSONField(default=list)
    verdicts = models.JSONField(default=dict)
    complete = models.BooleanField(default=False)
    interrupted_by = models.CharField(max_length=100, blank=True)

    class Meta:
        indexes = [models.Index(fields=["-started_at"], name="ways_replay_started_idx")]

    def __str__(self) -> str:
        return f"ways replay #{self.pk}"
