"""Admin for the fleet: tools with their policy; history rows are read-only.

A policy saved here is pushed to Redis at once (``fleet_policy_sync``). State changes go through
the operator actions (API or dashboard), which need a reason and are audited; the admin does not
offer a way around them.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from breakers.fleet_service import fleet_policy_sync
from breakers.models import (
    Alert,
    AlertChannel,
    AlertState,
    ChannelSource,
    FleetTransition,
    Incident,
    OperatorAction,
    Probe,
    SlackUser,
    Tool,
    ToolPolicy,
    ToolSilence,
)
from breakers.transports.slack import validate_webhook_url


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ToolPolicyInline(admin.StackedInline):
    model = ToolPolicy
    can_delete = True
    extra = 0
    fields = [
        ("threshold", "min_workers"),
        ("cooldown_seconds", "max_cooldown_seconds"),
        ("spend_amount_usd", "spend_window_seconds"),
        "probe_kind",
        ("probe_url", "probe_method", "probe_expected_status"),
        "probe_callable",
        "probe_timeout_seconds",
        ("updated_at", "updated_by"),
    ]
    readonly_fields = ["updated_at", "updated_by"]


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ["name", "state", "since", "seq", "first_seen_at"]
    list_filter = ["state"]
    search_fields = ["name"]
    inlines = [ToolPolicyInline]
    readonly_fields = [
        "name",
        "first_seen_at",
        "state",
        "auto_state",
        "forced",
        "since",
        "auto_reason",
        "forced_reason",
        "cooldown_ms",
        "open_until",
        "window",
        "seq",
    ]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # tools appear with their first event

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        for policy in formset.save(commit=False):
            policy.updated_by = f"user:{request.user.get_username()}"
            policy.save()
        for policy in formset.deleted_objects:
            policy.delete()
        tool = form.instance
        fleet_policy_sync(tool=tool, policy=ToolPolicy.objects.filter(tool=tool).first())


@admin.register(FleetTransition)
class FleetTransitionAdmin(ReadOnlyAdmin):
    list_display = ["tool", "seq", "at", "from_state", "to_state", "cause_kind", "reason"]
    list_filter = ["cause_kind", "to_state"]
    search_fields = ["tool__name"]
    date_hierarchy = "at"


@admin.register(Incident)
class IncidentAdmin(ReadOnlyAdmin):
    list_display = ["tool", "opened_at", "closed_at", "reason"]
    search_fields = ["tool__name"]
    date_hierarchy = "opened_at"


@admin.register(Probe)
class ProbeAdmin(ReadOnlyAdmin):
    list_display = ["tool", "window", "started_at", "ok", "status_code", "latency_ms", "decided"]
    list_filter = ["ok", "decided"]
    search_fields = ["tool__name"]


@admin.register(OperatorAction)
class OperatorActionAdmin(ReadOnlyAdmin):
    list_display = ["tool", "action", "actor", "at", "reason"]
    list_filter = ["action"]
    search_fields = ["tool__name", "actor", "reason"]
    date_hierarchy = "at"


# -- Slack alerts -------------------------------------------------------------------------------


class AlertChannelForm(forms.ModelForm):
    """The webhook URL is write-only: the form never renders it back (it is a secret); left
    empty when editing, the stored URL is kept."""

    webhook_url = forms.CharField(
        label="Webhook URL",
        required=False,
        max_length=500,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="https://hooks.slack.com/services/… — shown masked once saved. "
        "Leave empty to keep the current one.",
    )

    url_changed = False

    class Meta:
        model = AlertChannel
        fields = ["name", "webhook_url", "enabled"]

    def clean_webhook_url(self) -> str:
        raw = self.cleaned_data.get("webhook_url", "")
        if not raw.strip():
            if self.instance.pk is None:
                raise forms.ValidationError("a new channel needs its webhook URL")
            return self.instance.webhook_url
        try:
            url = validate_webhook_url(raw)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        self.url_changed = url != self.instance.webhook_url
        return url


@admin.register(AlertChannel)
class AlertChannelAdmin(admin.ModelAdmin):
    form = AlertChannelForm
    list_display = [
        "name",
        "masked_url",
        "source",
        "enabled",
        "broken_at",
        "last_error",
        "last_sent_at",
    ]
    list_filter = ["source", "enabled"]
    search_fields = ["name"]
    readonly_fields = ["masked_url", "source", "created_at", "broken_at", "last_error"]
    actions = ["clear_broken"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is not None and obj.source == ChannelSource.SETTINGS:
            # Its URL comes from the environment; editing it here would be overwritten.
            return ["name", "masked_url", "source", "enabled", "broken_at", "last_error"]
        shown: list[str] = ["name", "webhook_url", "enabled"]
        if obj is not None:
            shown[1:1] = ["masked_url"]
            shown += ["source", "created_at", "broken_at", "last_error"]
        return shown

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fields = list(self.readonly_fields)
        if obj is not None and obj.source == ChannelSource.SETTINGS:
            fields.append("name")
        return fields

    @admin.display(description="webhook URL")
    def masked_url(self, obj: AlertChannel) -> str:
        return obj.masked_url

    def save_model(self, request: HttpRequest, obj: AlertChannel, form: Any, change: bool) -> None:
        if change and getattr(form, "url_changed", False):
            # A new URL is a new webhook: whatever broke the old one says nothing about it.
            obj.broken_at, obj.last_error = None, ""
        if not change:
            obj.source = ChannelSource.ADMIN
        super().save_model(request, obj, form, change)

    @admin.action(description="Clear the broken flag (send to these channels again)")
    def clear_broken(self, request: HttpRequest, queryset: QuerySet[AlertChannel]) -> None:
        count = queryset.exclude(broken_at=None).update(broken_at=None, last_error="")
        self.message_user(request, f"{count} channel(s) will be sent to again.", messages.SUCCESS)


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "kind",
        "tool",
        "channel",
        "state",
        "attempts",
        "next_attempt_at",
        "sent_at",
        "last_error",
    ]
    list_filter = ["state", "kind", "channel"]
    search_fields = ["tool__name", "last_error"]
    date_hierarchy = "created_at"
    list_select_related = ["tool", "channel"]
    readonly_fields = [
        "kind",
        "tool",
        "channel",
        "state",
        "attempts",
        "last_error",
        "next_attempt_at",
        "claimed_at",
        "sent_at",
        "created_at",
        "transition",
        "operator_action",
        "incident",
        "group",
        "group_until",
        "payload",
        "message",
    ]
    actions = ["retry_failed"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser  # the retry action needs it; every field is read-only

    @admin.action(description="Send failed alerts again (now)")
    def retry_failed(self, request: HttpRequest, queryset: QuerySet[Alert]) -> None:
        from breakers.alerts.creation import enqueue_on_commit

        ids = list(
            queryset.filter(state=AlertState.FAILED, channel__broken_at=None).values_list(
                "pk", flat=True
            )
        )
        Alert.objects.filter(pk__in=ids, state=AlertState.FAILED).update(
            state=AlertState.PENDING, attempts=0, next_attempt_at=timezone.now()
        )
        enqueue_on_commit(ids)
        self.message_user(request, f"{len(ids)} alert(s) queued again.", messages.SUCCESS)


# -- Slack bot mode -----------------------------------------------------------------------------


@admin.register(SlackUser)
class SlackUserAdmin(admin.ModelAdmin):
    """Links a Slack user to a dashboard user: their presses in Slack run with that user's
    permissions. The Slack ids are on the person's Slack profile ("Copy member ID") and in the
    workspace's URL; an email match is never enough on its own (emails here are not verified)."""

    list_display = ["slack_user_id", "team_id", "slack_name", "user", "linked_by", "linked_at"]
    search_fields = ["slack_user_id", "slack_name", "user__username", "user__email"]
    raw_id_fields = ["user"]
    readonly_fields = ["linked_at", "linked_by"]
    fields = ["team_id", "slack_user_id", "slack_name", "user", "linked_at", "linked_by"]

    def save_model(self, request: HttpRequest, obj: SlackUser, form: Any, change: bool) -> None:
        obj.linked_by = f"admin:{request.user.get_username()}"
        super().save_model(request, obj, form, change)


@admin.register(ToolSilence)
class ToolSilenceAdmin(ReadOnlyAdmin):
    list_display = ["tool", "until", "incident", "set_by", "set_at", "ended_at"]
    search_fields = ["tool__name", "set_by"]
    date_hierarchy = "set_at"
