"""Fleet breaker rows: tools and policies, transitions, incidents, probes, operator actions.

Redis holds the live fleet state (``breakers/fleet/store.py``); the database holds its history
and is the source it is rebuilt from when Redis loses its data. Every transition is a row written
in the same transaction as the ``Tool`` row that mirrors the state it leads to (healthchecks'
``Flip`` shape), so the newest state of every tool is one query away.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.module_loading import import_string

from breaker_panel.vocabulary import State
from breakers.fleet.rules import (
    OUT_STATES,
    CauseKind,
    FleetPolicy,
    Forced,
    OperatorActionKind,
    TrialMode,
    micro_usd,
    opening_rule,
)
from breakers.fleet.store import PolicyOverrides
from breakers.probes.runner import probe_callable_allowed
from runs.models import AgentToken, BreakerState

# The last millisecond Python's datetime can hold (9999-12-31T23:59:59.999Z).
MAX_DATETIME_MS = 253_402_300_799_999


def ms_to_datetime(ms: int) -> datetime | None:
    """Redis's ms timestamps; 0 means never."""
    return datetime_from_ms(ms) if ms else None


def datetime_from_ms(ms: int) -> datetime:
    # Clamped: a value beyond year 9999 (Redis holding what an unbounded cooldown once made)
    # must read as "far away", not raise in whatever page or step shows it.
    return datetime.fromtimestamp(min(max(ms, 0), MAX_DATETIME_MS) / 1000, tz=UTC)


def datetime_to_ms(value: datetime | None) -> int:
    return round(value.timestamp() * 1000) if value is not None else 0


class AutoState(models.TextChoices):
    """The automatic breaker underneath any forced state."""

    CLOSED = State.CLOSED.value
    OPEN = State.OPEN.value
    HALF_OPEN = State.HALF_OPEN.value


class ForcedState(models.TextChoices):
    NONE = "", "not forced"
    FORCED_OPEN = Forced.OPEN.value, "forced open"
    FORCED_CLOSED = Forced.CLOSED.value, "forced closed"


class Tool(models.Model):
    """A tool the fleet has seen (it appears with its first ``tool.call``).

    The state fields mirror Redis as of the newest persisted transition (``seq``); they are what
    ``fleet_rebuild`` writes back when Redis has lost its data.
    """

    name = models.CharField(max_length=200, unique=True)
    first_seen_at = models.DateTimeField(default=timezone.now)
    state = models.CharField(max_length=20, choices=BreakerState, default=BreakerState.CLOSED)
    auto_state = models.CharField(max_length=20, choices=AutoState, default=AutoState.CLOSED)
    forced = models.CharField(max_length=20, choices=ForcedState, default="", blank=True)
    since = models.DateTimeField(null=True, blank=True)
    auto_reason = models.TextField(blank=True)
    forced_reason = models.TextField(blank=True)
    cooldown_ms = models.PositiveBigIntegerField(default=0)
    open_until = models.DateTimeField(null=True, blank=True)
    window = models.PositiveIntegerField(default=0)
    seq = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def reason(self) -> str:
        return self.forced_reason if self.forced else self.auto_reason

    @property
    def is_out(self) -> bool:
        return self.state in OUT_STATES


class ProbeKind(models.TextChoices):
    NONE = "", "none (one agent call is the trial)"
    HTTP = "http", "HTTP check"
    CALLABLE = "callable", "importable callable"


class ProbeMethod(models.TextChoices):
    GET = "GET"
    HEAD = "HEAD"
    POST = "POST"


# (low, high), inclusive, of every number an operator can set on a policy: the API (422), the
# model's validation (the admin) and the database's check constraints all use these. The highs
# keep every derived Redis number (now + cooldown, in ms) an exact integer far from overflow.
POLICY_BOUNDS: dict[str, tuple[float, float]] = {
    "threshold": (1, 10_000),
    "min_workers": (1, 10_000),
    "cooldown_seconds": (0.1, 604_800.0),  # 7 days
    "max_cooldown_seconds": (0.1, 604_800.0),
    "probe_expected_status": (100, 599),
    "probe_timeout_seconds": (0.1, 60.0),
    # The spend rule: 0 USD is off (for a tool: off even when the setting turns it on); the
    # window stays within the hour the agents' run logs are kept for (breakers/fleet/store.py).
    "spend_amount_usd": (0.0, 100_000.0),
    "spend_window_seconds": (10.0, 3600.0),
}
_NULLABLE_POLICY_NUMBERS = (
    "threshold",
    "min_workers",
    "cooldown_seconds",
    "max_cooldown_seconds",
    "spend_amount_usd",
    "spend_window_seconds",
)


def policy_bound_error(field: str, value: float | None) -> str | None:
    """The message for a value outside its bound (None when it is inside or unset)."""
    if value is None:
        return None
    low, high = POLICY_BOUNDS[field]
    # `not low <= value <= high` is also true for NaN.
    if not low <= value <= high:
        return f"{field} must be between {low:g} and {high:g}"
    return None


def _policy_constraints() -> list[models.BaseConstraint]:
    constraints: list[models.BaseConstraint] = []
    for field, (low, high) in POLICY_BOUNDS.items():
        within = models.Q(**{f"{field}__gte": low, f"{field}__lte": high})
        if field in _NULLABLE_POLICY_NUMBERS:
            within |= models.Q(**{f"{field}__isnull": True})
        constraints.append(
            models.CheckConstraint(
                condition=within,
                name=f"policy_{field}_bounds",
                violation_error_message=f"{field} must be between {low:g} and {high:g}",
            )
        )
    return constraints


class ToolPolicy(models.Model):
    """Per-tool overrides; an empty field takes the default from settings (``BREAKER_*``)."""

    tool = models.OneToOneField(
        Tool, on_delete=models.CASCADE, primary_key=True, related_name="policy"
    )
    threshold = models.PositiveIntegerField(null=True, blank=True)
    cooldown_seconds = models.FloatField(null=True, blank=True)
    max_cooldown_seconds = models.FloatField(null=True, blank=True)
    min_workers = models.PositiveIntegerField(null=True, blank=True)
    probe_kind = models.CharField(max_length=10, choices=ProbeKind, default="", blank=True)
    probe_url = models.URLField(max_length=500, blank=True)
    probe_method = models.CharField(max_length=6, choices=ProbeMethod, default=ProbeMethod.GET)
    probe_expected_status = models.PositiveSmallIntegerField(default=200)
    probe_timeout_seconds = models.FloatField(default=5.0)
    probe_callable = models.CharField(max_length=300, blank=True)
    # Empty: the setting (BREAKER_SPEND_AMOUNT_USD, BREAKER_SPEND_WINDOW_SECONDS); 0 USD: off.
    spend_amount_usd = models.FloatField(
        null=True, blank=True, help_text="USD burned by failing runs that opens it; 0 turns it off"
    )
    spend_window_seconds = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.CharField(max_length=200, blank=True)

    class Meta:
        verbose_name_plural = "tool policies"
        constraints = _policy_constraints()

    def __str__(self) -> str:
        return f"policy of {self.tool}"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for field in POLICY_BOUNDS:
            message = policy_bound_error(field, getattr(self, field))
            if message is not None:
                errors[field] = message
        if self.probe_kind == ProbeKind.HTTP and not self.probe_url:
            errors["probe_url"] = "an HTTP probe needs a URL"
        if self.probe_kind == ProbeKind.CALLABLE:
            errors.update(_check_callable(self.probe_callable))
        if not errors:
            try:
                self.fleet_policy()
            except ValueError as exc:
                errors["cooldown_seconds"] = str(exc)
        if errors:
            raise ValidationError(errors)

    @property
    def trial(self) -> TrialMode:
        return TrialMode.PROBE if self.probe_kind else TrialMode.LEASE

    def fleet_policy(self) -> FleetPolicy:
        """These overrides on top of the settings defaults (raises ValueError if inconsistent)."""
        return effective_policy(self)

    def overrides(self) -> PolicyOverrides:
        """What the fleet store keeps of this policy; None leaves the settings default."""
        return PolicyOverrides(
            threshold=self.threshold,
            min_workers=self.min_workers,
            cooldown_ms=_ms_or_none(self.cooldown_seconds),
            max_cooldown_ms=_ms_or_none(self.max_cooldown_seconds),
            trial=TrialMode.PROBE if self.probe_kind else None,
            spend_amount_micro=None
            if self.spend_amount_usd is None
            else micro_usd(self.spend_amount_usd),
            spend_window_ms=_ms_or_none(self.spend_window_seconds),
        )


def default_policy() -> FleetPolicy:
    return FleetPolicy(
        threshold=settings.BREAKER_THRESHOLD,
        cooldown_ms=round(settings.BREAKER_COOLDOWN_SECONDS * 1000),
        max_cooldown_ms=round(settings.BREAKER_MAX_COOLDOWN_SECONDS * 1000),
        min_workers=settings.BREAKER_MIN_WORKERS,
        spend_amount_micro=micro_usd(settings.BREAKER_SPEND_AMOUNT_USD),
        spend_window_ms=round(settings.BREAKER_SPEND_WINDOW_SECONDS * 1000),
    )


def effective_policy(policy: ToolPolicy | None) -> FleetPolicy:
    base = default_policy()
    if policy is None:
        return base
    return FleetPolicy(
        threshold=policy.threshold or base.threshold,
        cooldown_ms=_ms_or_none(policy.cooldown_seconds) or base.cooldown_ms,
        max_cooldown_ms=_ms_or_none(policy.max_cooldown_seconds) or base.max_cooldown_ms,
        min_workers=policy.min_workers or base.min_workers,
        trial=policy.trial,
        spend_amount_micro=base.spend_amount_micro
        if policy.spend_amount_usd is None
        else micro_usd(policy.spend_amount_usd),
        spend_window_ms=_ms_or_none(policy.spend_window_seconds) or base.spend_window_ms,
    )


def _ms_or_none(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def _check_callable(path: str) -> dict[str, str]:
    if not path:
        return {"probe_callable": "a callable probe needs a dotted path"}
    if not probe_callable_allowed(path):
        allowed = ", ".join(settings.BREAKER_PROBE_CALLABLE_PREFIXES) or "none configured"
        return {"probe_callable": f"{path!r} is not under an allowed prefix ({allowed})"}
    try:
        target = import_string(path)
    # Importing runs the module's code: whatever it raises is a bad path for the operator, not
    # a server error.
    except Exception as exc:  # noqa: BLE001
        return {"probe_callable": f"cannot import {path!r}: {type(exc).__name__}: {exc}"}
    if not callable(target):
        return {"probe_callable": f"{path!r} is not callable"}
    return {}


class Probe(models.Model):
    """One half-open probe: which window it decided (or not) and what the check saw."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="probes")
    window = models.PositiveIntegerField()
    kind = models.CharField(max_length=10, choices=ProbeKind)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    ok = models.BooleanField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField()
    error = models.TextField(blank=True)
    decided = models.BooleanField(default=False)  # False: the window was over when it reported

    class Meta:
        indexes = [models.Index(fields=["tool", "started_at"], name="probe_tool_started_idx")]

    def __str__(self) -> str:
        return f"probe of {self.tool} ({'ok' if self.ok else 'failed'})"


# Audited actions that change no fleet state: acknowledge and silence (from Slack), and ending a
# silence early (from Slack, the tool page or the API).
ACKNOWLEDGE, SILENCE, UNSILENCE = "acknowledge", "silence", "unsilence"
NOTE_ACTIONS = (ACKNOWLEDGE, SILENCE, UNSILENCE)


class OperatorAction(models.Model):
    """The audit row of a fleet-wide action: who, when, why, and the state before and after."""

    tool = models.ForeignKey(Tool, on_delete=models.PROTECT, related_name="operator_actions")
    # The fleet actions, and the two that change no state but are audited all the same
    # (acknowledge an incident, silence a tool's repeat alerts: from Slack).
    action = models.CharField(
        max_length=20,
        choices=[(a.value, a.value) for a in OperatorActionKind] + [(a, a) for a in NOTE_ACTIONS],
    )
    reason = models.TextField()
    at = models.DateTimeField(default=timezone.now, db_index=True)
    # Either a logged-in user or an operator token; `actor` keeps who it was if either is deleted.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    token = models.ForeignKey(
        AgentToken, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor = models.CharField(max_length=250)
    # Where it was done when not on the dashboard or the API: "Slack (@alice)".
    via = models.CharField(max_length=120, blank=True, default="")
    before = models.JSONField()
    after = models.JSONField()

    class Meta:
        indexes = [models.Index(fields=["tool", "at"], name="opaction_tool_at_idx")]

    def __str__(self) -> str:
        return f"{self.action} {self.tool} by {self.actor}"


class FleetTransition(models.Model):
    """One change of a tool's fleet breaker and its cause, in Redis's order (``seq``)."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="transitions")
    seq = models.PositiveBigIntegerField()
    at = models.DateTimeField()
    from_state = models.CharField(max_length=20, choices=BreakerState)
    to_state = models.CharField(max_length=20, choices=BreakerState)
    auto_from = models.CharField(max_length=20, choices=AutoState)
    auto_to = models.CharField(max_length=20, choices=AutoState)
    forced = models.CharField(max_length=20, choices=ForcedState, blank=True)
    cause_kind = models.CharField(max_length=20, choices=[(c.value, c.value) for c in CauseKind])
    # failures: consecutive, workers {id: failures}, events [ids]; spend: rule, spend_usd,
    # amount_usd, window_seconds, runs, run_keys, workers {id: runs}, workers_spend_usd;
    # cooldown: cooldown_ms, window; trial: window, holder, outcome (+ event_id and worker, or
    # probe); operator: action, reason, actor.
    cause = models.JSONField(default=dict)
    reason = models.TextField(blank=True)
    probe = models.ForeignKey(
        Probe, on_delete=models.SET_NULL, null=True, blank=True, related_name="transitions"
    )
    operator_action = models.ForeignKey(
        OperatorAction,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="transitions",
    )

    class Meta:
        ordering = ["tool", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["tool", "seq"], name="fleettransition_tool_seq_uniq")
        ]
        indexes = [models.Index(fields=["at"], name="fleettransition_at_idx")]

    def __str__(self) -> str:
        return f"{self.tool}: {self.from_state} -> {self.to_state}"

    @property
    def opening_rule(self) -> str | None:
        """``"consecutive"`` or ``"spend"`` when an automatic rule opened the tool here (the
        spend-avoided ledger counts from ``at``); None for any other transition."""
        if self.from_state in OUT_STATES or self.to_state not in OUT_STATES:
            return None
        return opening_rule(self.cause_kind)


class Incident(models.Model):
    """A stretch of time in which a tool was out of the fleet (open, half-open or forced open)."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="incidents")
    opened_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    opened_by = models.ForeignKey(FleetTransition, on_delete=models.PROTECT, related_name="+")
    closed_by = models.ForeignKey(
        FleetTransition, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-opened_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tool"],
                condition=models.Q(closed_at__isnull=True),
                name="incident_one_open_per_tool",
            )
        ]
        indexes = [models.Index(fields=["opened_at"], name="incident_opened_idx")]

    def __str__(self) -> str:
        return f"incident on {self.tool} from {self.opened_at:%Y-%m-%d %H:%M:%S}"

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


# -- Slack alerts -------------------------------------------------------------------------------


class ChannelSource(models.TextChoices):
    SETTINGS = "settings", "settings (SLACK_WEBHOOK_URL)"
    ADMIN = "admin", "admin"


class AlertChannel(models.Model):
    """A Slack incoming webhook that alerts go to.

    The webhook URL is a secret: it is stored as given but only ever shown through
    ``masked_url``. The channel of ``SLACK_WEBHOOK_URL`` (``source=settings``) is created and kept
    in step with the setting by ``breakers.alerts.ensure_settings_channel`` when alerts are made.
    ``broken_at``/``last_error`` say that Slack refused the webhook itself (removed hook, revoked
    token, archived channel): nothing more is sent to it until someone fixes or re-enables it.
    """

    name = models.CharField(max_length=100, unique=True)
    webhook_url = models.CharField(max_length=500, unique=True)
    source = models.CharField(max_length=10, choices=ChannelSource, default=ChannelSource.ADMIN)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    broken_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["source"],
                condition=models.Q(source="settings"),
                name="alertchannel_one_settings_channel",
            )
        ]

    def __str__(self) -> str:
        return self.name  # never the URL

    @property
    def masked_url(self) -> str:
        from breakers.transports.slack import mask_webhook_url

        return mask_webhook_url(self.webhook_url)

    @property
    def is_broken(self) -> bool:
        return self.broken_at is not None

    def clean(self) -> None:
        from breakers.transports.slack import validate_webhook_url

        try:
            self.webhook_url = validate_webhook_url(self.webhook_url)
        except ValueError as exc:
            raise ValidationError({"webhook_url": str(exc)}) from None


class AlertKind(models.TextChoices):
    OPENED = "opened"
    CLOSED = "closed"
    MANUAL = "manual"
    FLAPPING = "flapping"


class AlertState(models.TextChoices):
    PENDING = "pending"  # waiting for its (next) attempt at next_attempt_at
    SENDING = "sending"  # claimed by one delivery task (claimed_at)
    SENT = "sent"
    FAILED = "failed"  # gave up: permanent error, broken or disabled channel, or attempts used up
    # Made while the tool was silenced (from Slack): recorded, never sent.
    SILENCED = "silenced"
    # Folded into the tool's flapping alert (``group``): never sent on its own, unless it is the
    # tool's last word when the flapping spell ends (the sweep then makes it pending).
    GROUPED = "grouped"


class Alert(models.Model):
    """One message about one event (a transition or an operator action) to one channel.

    The event is ``transition`` (opened, closed, flapping) or ``operator_action`` (manual);
    ``incident`` is the incident it belongs to. ``payload`` holds the facts known when the event
    was recorded (for flapping alerts, the spell's counts, updated as openings are folded in);
    ``message`` is the exact Slack body, built at the first attempt and resent as is by retries.
    """

    kind = models.CharField(max_length=10, choices=AlertKind)
    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="alerts")
    transition = models.ForeignKey(
        FleetTransition, on_delete=models.CASCADE, null=True, blank=True, related_name="alerts"
    )
    operator_action = models.ForeignKey(
        OperatorAction, on_delete=models.CASCADE, null=True, blank=True, related_name="alerts"
    )
    incident = models.ForeignKey(
        Incident, on_delete=models.SET_NULL, null=True, blank=True, related_name="alerts"
    )
    channel = models.ForeignKey(AlertChannel, on_delete=models.CASCADE, related_name="alerts")
    state = models.CharField(max_length=10, choices=AlertState, default=AlertState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    payload = models.JSONField(default=dict)
    message = models.JSONField(null=True, blank=True)
    # Flapping alerts: the spell folds events until this moment. Grouped alerts: their spell.
    group_until = models.DateTimeField(null=True, blank=True)
    group = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="grouped"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["transition", "channel"],
                condition=models.Q(transition__isnull=False),
                name="alert_one_per_transition_channel",
            ),
            models.UniqueConstraint(
                fields=["operator_action", "channel"],
                condition=models.Q(operator_action__isnull=False),
                name="alert_one_per_action_channel",
            ),
            models.CheckConstraint(
                condition=models.Q(transition__isnull=False)
                | models.Q(operator_action__isnull=False),
                name="alert_has_an_event",
            ),
        ]
        indexes = [
            # The sweep's queries: stuck claims and overdue pending alerts.
            models.Index(fields=["state", "next_attempt_at"], name="alert_state_next_idx"),
            models.Index(fields=["tool", "kind", "group_until"], name="alert_tool_kind_group_idx"),
            models.Index(fields=["incident", "created_at"], name="alert_incident_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} alert on {self.tool} to {self.channel} ({self.state})"

    # The names the dashboard's incident timeline reads (``controlplane/dashboard/incidents.py``).
    @property
    def at(self) -> datetime:
        return self.sent_at or self.created_at

    @property
    def status(self) -> str:
        return self.state

    @property
    def error(self) -> str:
        return self.last_error


# -- Slack bot mode (breakers.slack) ------------------------------------------------------------


class SlackUser(models.Model):
    """A Slack user (in one workspace) linked to a dashboard user, whose permissions their
    presses in Slack run with. Made by an admin, or once by the user from a logged-in page;
    never from a matching email alone (dashboard emails are not verified)."""

    team_id = models.CharField(max_length=32)
    slack_user_id = models.CharField(max_length=32)
    slack_name = models.CharField(max_length=120, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_links"
    )
    linked_at = models.DateTimeField(default=timezone.now)
    linked_by = models.CharField(max_length=200, blank=True)

    class Meta:
        verbose_name = "Slack user link"
        constraints = [
            models.UniqueConstraint(
                fields=["team_id", "slack_user_id"], name="slackuser_one_link_per_slack_user"
            )
        ]

    def __str__(self) -> str:
        return f"{self.slack_user_id} ({self.team_id}) -> {self.user}"


class ToolSilenceQuerySet(models.QuerySet["ToolSilence"]):
    def in_force(self, now: datetime) -> ToolSilenceQuerySet:
        """The silences that hold alerts at ``now``: not ended, and either not yet at their
        ``until`` or, without one, while their incident is open."""
        return (
            self.filter(ended_at__isnull=True)
            .filter(
                models.Q(until__gt=now)
                | models.Q(until__isnull=True, incident__closed_at__isnull=True)
            )
            .exclude(until__isnull=True, incident__isnull=True)
        )


class ToolSilence(models.Model):
    """No repeat alert for ``tool`` until ``until`` (or, when it is None, until ``incident``
    closes). ``ended_at``: lifted early, by ``ended_by`` from ``ended_via`` (ended from Slack,
    the tool page or the API, or replaced by a newer silence)."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="silences")
    incident = models.ForeignKey(
        Incident, on_delete=models.SET_NULL, null=True, blank=True, related_name="silences"
    )
    until = models.DateTimeField(null=True, blank=True)
    set_at = models.DateTimeField(default=timezone.now)
    set_by = models.CharField(max_length=250)
    via = models.CharField(max_length=120, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.CharField(max_length=250, blank=True)
    ended_via = models.CharField(max_length=120, blank=True)

    objects = ToolSilenceQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["tool", "set_at"], name="toolsilence_tool_set_idx")]

    def __str__(self) -> str:
        return f"silence of {self.tool} by {self.set_by}"

    def active_at(self, now: datetime) -> bool:
        if self.ended_at is not None:
            return False
        if self.until is not None:
            return self.until > now
        incident = self.incident
        return incident is not None and incident.closed_at is None


class SlackIncidentMessage(models.Model):
    """The one bot message of an incident (``channel`` + ``ts`` once posted), and what the
    incident's card says beyond the fleet rows: who acknowledged it. Every sync renders the
    card from the current rows, so the last sync always shows the newest state."""

    incident = models.OneToOneField(
        Incident, on_delete=models.CASCADE, related_name="slack_message"
    )
    channel = models.CharField(max_length=64, blank=True)
    ts = models.CharField(max_length=32, blank=True)
    acknowledged_by = models.CharField(max_length=250, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    posted_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"Slack message of {self.incident}"


class SlackActionState(models.TextChoices):
    PENDING = "pending"
    DONE = "done"
    REFUSED = "refused"  # the fleet said no (not forced, unknown tool, Redis down)


class SlackAction(models.Model):
    """One accepted press in Slack (signature, user and permission checked), done by Celery."""

    link = models.ForeignKey(SlackUser, on_delete=models.SET_NULL, null=True, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="+")
    action = models.CharField(max_length=20)
    option = models.CharField(max_length=20, blank=True)  # silence: 30m, 2h, 8h, recovery
    reason = models.TextField(blank=True)
    via = models.CharField(max_length=120)
    response_url = models.CharField(max_length=500, blank=True)
    received_at = models.DateTimeField(default=timezone.now)
    state = models.CharField(
        max_length=10, choices=SlackActionState, default=SlackActionState.PENDING
    )
    done_at = models.DateTimeField(null=True, blank=True)
    result = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.action} on {self.incident} ({self.state})"
