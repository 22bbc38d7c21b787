"""Top-level URLs: the admin, the auth views, health and metrics; the apps add the API and the
dashboard."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path

from breakers.observability.health import healthz, readyz
from breakers.observability.metrics import metrics
from breakers.slack.endpoint import slack_actions
from controlplane.api import api
from controlplane.login_throttle import ThrottledLoginView
from runs.otlp.views import post_traces

admin.site.site_header = "Breaker Panel admin"
admin.site.site_title = "Breaker Panel admin"
admin.site.index_title = "Tools, probes, policies and users"
admin.site.site_url = "/"


@login_not_required
def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """Browsers ask for /favicon.ico whatever the page says: send them to the static icon."""
    return HttpResponseRedirect(static("favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    # Only login and logout: Django's password-reset views would be public pages sending mail.
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", api.urls),
    # OTLP/HTTP exporters append /v1/traces to their endpoint (issue 15).
    path("v1/traces", post_traces, name="otlp-traces"),
    # Slack's interactivity request URL (bot mode): signed button presses and modal submissions.
    path("slack/actions", slack_actions, name="slack-actions"),
    # Operational endpoints, outside /api/ and the login (each view has its own access rule).
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("", include("controlplane.dashboard.urls")),
]
