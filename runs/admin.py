"""Admin for what agents report. Event rows are read-only: they are facts agents reported."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from runs.models import (
    AgentToken,
    IngestedEvent,
    ModelCall,
    ReportedTransition,
    Run,
    ToolCall,
    Worker,
)


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):  # type: ignore[type-arg]
    extra = 0
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = (
        "name",
        "display_prefix",
        "is_operator",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    list_filter = ("is_operator", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("name", "display_prefix")
    # The hash is never shown; the prefix is enough to recognise a token someone pasted.
    fields = (
        "name", "display_prefix", "is_operator", "worker_id", "created_at", "last_used_at",
        "revoked_at",
    )  # fmt: skip
    readonly_fields = (
        "display_prefix", "is_operator", "worker_id", "created_at", "last_used_at", "revoked_at",
    )  # fmt: skip
    actions = ("revoke",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A token must be shown exactly once, in a terminal: `manage.py create_agent_token`.
        return False

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[AgentToken]) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdmin):
    list_display = ("worker_id", "first_seen_at", "last_seen_at", "dropped_events")
    search_fields = ("worker_id",)
    ordering = ("-last_seen_at",)


class ToolCallInline(ReadOnlyInline):
    model = ToolCall
    fields = ("ts", "step", "tool", "outcome", "attempts", "duration_ms", "error")
    ordering = ("ts",)


class ModelCallInline(ReadOnlyInline):
    model = ModelCall
    fields = ("ts", "step", "model", "input_tokens", "output_tokens", "cost_usd", "duration_ms")
    ordering = ("ts",)


class TransitionInline(ReadOnlyInline):
    model = ReportedTransition
    fields = ("ts", "scope", "tool", "state", "reason")
    ordering = ("ts",)


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = (
        "run_id", "agent", "worker", "status", "degraded", "steps", "started_at", "duration_ms",
        "model_spend_usd", "tool_calls", "tool_failures",
    )  # fmt: skip
    list_filter = ("status", "degraded", "agent")
    search_fields = ("run_id", "agent", "worker__worker_id")
    list_select_related = ("worker",)
    date_hierarchy = "started_at"
    inlines = (ModelCallInline, ToolCallInline, TransitionInline)


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ("ts", "tool", "outcome", "attempts", "duration_ms", "run", "worker")
    list_filter = ("outcome", "tool")
    search_fields = ("tool", "event_id", "run__run_id")
    list_select_related = ("run", "worker")


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    list_display = ("ts", "model", "input_tokens", "output_tokens", "cost_usd", "run")
    search_fields = ("model", "event_id", "run__run_id")
    list_select_related = ("run",)


@admin.register(ReportedTransition)
class ReportedTransitionAdmin(ReadOnlyAdmin):
    list_display = ("ts", "scope", "tool", "state", "worker", "run")
    list_filter = ("scope", "state", "tool")
    search_fields = ("tool", "event_id", "run__run_id")
    list_select_related = ("worker", "run")


@admin.register(IngestedEvent)
class IngestedEventAdmin(ReadOnlyAdmin):
    list_display = ("event_id", "worker", "received_at")
    search_fields = ("event_id",)
    list_select_related = ("worker",)
