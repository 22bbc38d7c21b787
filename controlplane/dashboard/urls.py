from __future__ import annotations

from django.urls import path

from controlplane.dashboard import views

app_name = "dashboard"

# Tools are addressed by id, not name: a name is agent-sent text (any characters, "/" included),
# and ids keep every URL short, unambiguous and free of it.
urlpatterns = [
    path("", views.board, name="board"),
    path("tools/<int:pk>/", views.tool_detail, name="tool"),
    path("tools/<int:pk>/act/", views.tool_action, name="tool-action"),
    path("tools/<int:pk>/policy/", views.tool_policy, name="tool-policy"),
    path("tools/<int:pk>/unsilence/", views.tool_unsilence, name="tool-unsilence"),
    path("incidents/", views.incidents, name="incidents"),
    path("incidents/<int:pk>/", views.incident_detail, name="incident"),
    path("outages/", views.outages, name="outages"),
    path("replay-banner/", views.replay_banner, name="replay-banner"),
    path("audit/", views.audit_log, name="audit"),
    path("alerts/", views.alerts, name="alerts"),
    path("slack/link/", views.slack_link, name="slack-link"),
    path("runs/", views.runs_list, name="runs"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
]
