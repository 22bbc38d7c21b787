"""Filters typed by people: validated like any other input, with a clear message when wrong."""

from __future__ import annotations

from django import forms

from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import MAX_REASON_CHARS
from runs.models import RunStatus

DEGRADED_CHOICES = [("", "any"), ("yes", "degraded"), ("no", "not degraded")]


class RunFilterForm(forms.Form):
    run = forms.CharField(required=False, max_length=200, strip=True, label="Run id")
    agent = forms.CharField(required=False, max_length=200, strip=True)
    worker = forms.CharField(required=False, max_length=200, strip=True)
    status = forms.ChoiceField(
        required=False, choices=[("", "any"), *RunStatus.choices], label="Status"
    )
    degraded = forms.ChoiceField(required=False, choices=DEGRADED_CHOICES)
    page = forms.IntegerField(required=False, min_value=1, max_value=10_000)


STATE_FILTER_CHOICES = [
    ("", "any state"),
    ("out", "out of service"),
    ("open", "open"),
    ("half_open", "half-open"),
    ("forced_open", "forced open"),
    ("forced_closed", "forced closed"),
    ("closed", "closed"),
]


class BoardFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, strip=True, label="Tool name")
    state = forms.ChoiceField(required=False, choices=STATE_FILTER_CHOICES, label="State")


ACTION_CHOICES = [
    (OperatorActionKind.FORCE_OPEN.value, "Force open"),
    (OperatorActionKind.FORCE_CLOSE.value, "Force close"),
    (OperatorActionKind.RELEASE.value, "Release"),
    (OperatorActionKind.RESET.value, "Reset"),
]
ACTION_LABELS = dict(ACTION_CHOICES)
# What each action does, shown next to its choice: at 3 a.m. nobody should have to guess.
ACTION_HELP = {
    OperatorActionKind.FORCE_OPEN.value: "Kill switch: the tool leaves every run's toolset "
    "until released, whatever its breaker says.",
    OperatorActionKind.FORCE_CLOSE.value: "Keep the tool available to every run although "
    "breakers would open it.",
    OperatorActionKind.RELEASE.value: "End a forced state: back to what the automatic breaker "
    "says now.",
    OperatorActionKind.RESET.value: "Clear the automatic breaker's streak and close it; a "
    "forced state stays.",
}
NEXT_CHOICES = [("board", "board"), ("tool", "tool")]


class OperatorActionForm(forms.Form):
    action = forms.ChoiceField(choices=ACTION_CHOICES, widget=forms.RadioSelect)
    reason = forms.CharField(
        max_length=MAX_REASON_CHARS,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 2, "maxlength": MAX_REASON_CHARS}),
        error_messages={"required": "A reason is required: say why, it is shown to everyone."},
        help_text="Required. Shown on the board, in the audit log and in Slack.",
    )
    next = forms.ChoiceField(choices=NEXT_CHOICES, required=False)


class PolicyForm(forms.Form):
    """The breaker numbers of one tool; an empty field means the settings default."""

    threshold = forms.IntegerField(required=False, min_value=1, max_value=1000)
    min_workers = forms.IntegerField(
        required=False, min_value=1, max_value=1000, label="Min. distinct workers"
    )
    cooldown_seconds = forms.FloatField(
        required=False, min_value=0.001, max_value=86_400, label="Cooldown (s)"
    )
    max_cooldown_seconds = forms.FloatField(
        required=False, min_value=0.001, max_value=86_400, label="Max. cooldown (s)"
    )
    spend_amount_usd = forms.FloatField(
        required=False, min_value=0, max_value=100_000, label="Spend rule amount ($, 0: off)"
    )
    spend_window_seconds = forms.FloatField(
        required=False, min_value=10, max_value=3600, label="Spend rule window (s)"
    )


INCIDENT_STATUS_CHOICES = [("", "any"), ("open", "ongoing"), ("closed", "closed")]


class IncidentFilterForm(forms.Form):
    tool = forms.CharField(required=False, max_length=200, strip=True)
    status = forms.ChoiceField(required=False, choices=INCIDENT_STATUS_CHOICES)
    page = forms.IntegerField(required=False, min_value=1, max_value=10_000)


class AuditFilterForm(forms.Form):
    tool = forms.CharField(required=False, max_length=200, strip=True)
    action = forms.ChoiceField(
        required=False,
        choices=[
            ("", "any"),
            *ACTION_CHOICES,
            ("acknowledge", "Acknowledge"),
            ("silence", "Silence"),
            ("unsilence", "End silence"),
        ],
    )
    page = forms.IntegerField(required=False, min_value=1, max_value=10_000)
