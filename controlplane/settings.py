"""Settings that run out of the box: SQLite and localhost Redis unless the environment says so.

Every value that differs between machines comes from the environment through the strict helpers
in ``controlplane.env``. Production (DEBUG off) refuses to start with the development secret.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from controlplane.env import envbool, envfloat, envint, envlist, envstr, weak_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent

DEV_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
SECRET_KEY = envstr("SECRET_KEY", DEV_SECRET_KEY)
DEBUG = envbool("DEBUG", True)
if not SECRET_KEY.strip():
    raise ImproperlyConfigured("SECRET_KEY is set but empty")
if not DEBUG and SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off (refusing the dev secret)")
if not DEBUG and (weak := weak_secret_key(SECRET_KEY)):
    raise ImproperlyConfigured(f"SECRET_KEY is too weak for production: {weak}")
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])
SITE_URL = envstr("SITE_URL", "http://127.0.0.1:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",  # serves the API docs page from local static files instead of a CDN
    "runs",
    "breakers",
    "controlplane.dashboard",
    "controlplane.apps.ControlPlaneConfig",
]

MIDDLEWARE = [
    # First: the whole body is read (REQUEST_BODY_TIMEOUT_SECONDS) before anything can take a
    # database connection, so a trickling client never holds one (controlplane.body).
    "controlplane.body.BodyFirstMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy from SECURE_CSP (Django 6's own middleware).
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Times ingest batches and counts their events for /metrics (breakers.observability.metrics).
    "breakers.observability.metrics.IngestMetricsMiddleware",
    # Every page needs a login except those marked login_not_required; /api/ uses tokens.
    "controlplane.middleware.LoginRequiredMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        envstr("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=envint("DB_CONN_MAX_AGE", 60),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL + a busy timeout let the web server, Celery and the demo share one SQLite file.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
# Lets several test sessions share one PostgreSQL server without colliding.
if test_name := envstr("TEST_DATABASE_NAME", ""):
    DATABASES["default"]["TEST"] = {"NAME": test_name}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = envstr("REDIS_URL", "redis://localhost:6379/0")
# Every Redis call has a timeout: a slow or dead Redis must not hang a request.
REDIS_SOCKET_TIMEOUT = envfloat("REDIS_SOCKET_TIMEOUT", 2.0)

CELERY_BROKER_URL = envstr("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = False
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_timeout": 5, "socket_connect_timeout": 5}
CELERY_TIMEZONE = "UTC"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(envstr("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # Serves the plotly.min.js that ships inside the plotly package as vendor/plotly.min.js.
    "controlplane.staticfiles.PlotlyFinder",
]

SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG

# --- Production (DEBUG off): static files, TLS behind a proxy, CSP, probes (docs/operations.md) ---
if not DEBUG:
    # gunicorn serves /static/ itself: hashed names (cached for a year) and gzip/brotli copies
    # made by collectstatic. In DEBUG, runserver and the test live server serve them.
    MIDDLEWARE.insert(2, "whitenoise.middleware.WhiteNoiseMiddleware")
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
# Production runs behind a TLS-terminating proxy that sets X-Forwarded-Proto (and overwrites a
# client's own): then HTTPS is required and announced with HSTS. Set TLS_PROXY=False only for a
# plain-HTTP try-out on one machine (check --deploy then warns, as it should).
TLS_PROXY = envbool("TLS_PROXY", not DEBUG)
if TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", TLS_PROXY)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31_536_000 if TLS_PROXY else 0)
# Both on, as check --deploy asks; turn them off if other hosts of the domain still speak HTTP.
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", TLS_PROXY)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", TLS_PROXY)
# Health checks and scrapes come from inside the network over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
# Every page's scripts and styles are local files; plotly adds <style> elements at run time.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
}

# --- Login throttling (controlplane.login_throttle) ---
# After LOGIN_MAX_FAILURES wrong passwords for one username within LOGIN_FAILURE_WINDOW_SECONDS
# (or LOGIN_MAX_FAILURES_PER_ADDRESS from one client address) logins are refused, right password
# or not, until the window has passed.
LOGIN_MAX_FAILURES = envint("LOGIN_MAX_FAILURES", 5)
LOGIN_MAX_FAILURES_PER_ADDRESS = envint("LOGIN_MAX_FAILURES_PER_ADDRESS", 20)
LOGIN_FAILURE_WINDOW_SECONDS = envint("LOGIN_FAILURE_WINDOW_SECONDS", 900)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "WARNING")},
}

# --- Breaker defaults (the README's breaker rules); per-tool policies override them. ---
BREAKER_THRESHOLD = envint("BREAKER_THRESHOLD", 5)
BREAKER_COOLDOWN_SECONDS = envfloat("BREAKER_COOLDOWN_SECONDS", 30.0)
BREAKER_MAX_COOLDOWN_SECONDS = envfloat("BREAKER_MAX_COOLDOWN_SECONDS", 300.0)
BREAKER_MIN_WORKERS = envint("BREAKER_MIN_WORKERS", 2)
# The spend rule: a tool also opens fleet-wide (on the same quorum) once the model spend of runs
# whose calls to it all failed passes this many USD within BREAKER_SPEND_WINDOW_SECONDS. 0 (the
# default) turns it off for every tool without a policy amount of its own: the right amount
# depends on what a fleet's runs cost (docs/adr/0201-spend-rule-off-by-default.md).
BREAKER_SPEND_AMOUNT_USD = envfloat("BREAKER_SPEND_AMOUNT_USD", 0.0)
BREAKER_SPEND_WINDOW_SECONDS = envfloat("BREAKER_SPEND_WINDOW_SECONDS", 600.0)
# Who counts towards min_workers: distinct agent "tokens" (the default: a token, bound to its
# worker or not, counts once, so one token cannot forge the quorum by making up worker ids) or
# distinct "workers" (worker ids: an opt-in for a fleet that shares one token, which any holder
# of the token can then forge). See docs/api.md (trust model) and
# docs/adr/0176-quorum-counts-tokens-by-default.md.
FLEET_QUORUM = envstr("FLEET_QUORUM", "tokens")
if FLEET_QUORUM not in ("workers", "tokens"):
    raise ImproperlyConfigured(f"FLEET_QUORUM must be 'workers' or 'tokens', not {FLEET_QUORUM!r}")
# What ingest tells about the tool calls it accepted: a dotted path to the callable that builds its
# fleet updater (runs.fleet_interface.FleetUpdater); "runs.fleet_interface.NoFleet" runs ingest
# without a fleet. Why: docs/adr/0168-ingest-fleet-wiring.md.
INGEST_FLEET_UPDATER = "controlplane.wiring.FleetBreakerUpdater"
# An outcome that happened this long before a tool's last transition is stale and ignored by the
# fleet breaker (a margin for agents' clock skew; see breakers.fleet_service.commands).
BREAKER_STALE_OUTCOME_SECONDS = envfloat("BREAKER_STALE_OUTCOME_SECONDS", 2.0)
# Longer than one exhausted call (31 s in the outage we design for), so a trial can finish.
BREAKER_TRIAL_LEASE_SECONDS = envfloat("BREAKER_TRIAL_LEASE_SECONDS", 120.0)
# How long Redis remembers an applied event id: longer than any client keeps resending a batch.
BREAKER_DEDUPE_TTL_SECONDS = envfloat("BREAKER_DEDUPE_TTL_SECONDS", 3600.0)
# Dotted-path prefixes a callable probe must start with, so an operator's policy cannot make the
# Celery worker import and call just anything (os.abort). Checked on save and before each call.
# Networks HTTP probes may reach although they are internal (CIDRs; loopback, private, link-local
# and metadata addresses are refused otherwise), checked on the resolved address
# (breakers.probes.outbound_http).
BREAKER_HTTP_ALLOWED_NETWORKS = envlist("BREAKER_HTTP_ALLOWED_NETWORKS", [])
BREAKER_PROBE_CALLABLE_PREFIXES = envlist("BREAKER_PROBE_CALLABLE_PREFIXES", ["breakers.probes."])
# GET /api/v1/fleet?wait=N holds the request up to this long (long-poll, issue 14). Each held
# request occupies a server thread: 0 turns it off (agents then poll), as a sync-worker server must.
BREAKER_FLEET_WAIT_MAX_SECONDS = envfloat("BREAKER_FLEET_WAIT_MAX_SECONDS", 20.0)
# Held requests per server process; beyond it the answer is immediate and that agent polls.
# Under gthread keep it below --threads, or ingest waits behind them; under gevent (the compose
# file's workers) a held request is a parked greenlet
# (docs/adr/0095-gunicorn-runs-gevent-workers.md).
BREAKER_FLEET_MAX_WAITERS = envint("BREAKER_FLEET_MAX_WAITERS", 2)
# Held requests wake on the fleet's change announcements (Redis pub/sub) as well as the watcher's
# 25 ms poll; False: the poll alone (the fallback, and bench/bench_fleet.py's baseline).
BREAKER_FLEET_WATCH_ANNOUNCED = envbool("BREAKER_FLEET_WATCH_ANNOUNCED", True)
# Celery beat's fleet tick: half-open transitions, probes, rebuild after a Redis data loss.
BREAKER_TICK_SECONDS = envfloat("BREAKER_TICK_SECONDS", 1.0)
CELERY_BEAT_SCHEDULE = {
    "fleet-tick": {
        "task": "breakers.fleet_tick",
        "schedule": BREAKER_TICK_SECONDS,
        "options": {"expires": 10},
    },
}

# --- Ingest limits (documented in docs/api.md). ---
INGEST_MAX_BODY_BYTES = envint("INGEST_MAX_BODY_BYTES", 1_048_576)
INGEST_MAX_EVENTS = envint("INGEST_MAX_EVENTS", 1000)
# PostgreSQL: a batch waits at most this long for a row lock, and runs at most this long,
# before it is rolled back and answered 503 (resend later).
INGEST_LOCK_TIMEOUT_MS = envint("INGEST_LOCK_TIMEOUT_MS", 5000)
INGEST_STATEMENT_TIMEOUT_MS = envint("INGEST_STATEMENT_TIMEOUT_MS", 15000)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(INGEST_MAX_BODY_BYTES, 2_621_440)
# Every request body must arrive whole within this long (else 408); it is read before anything
# takes a database connection (controlplane.body).
REQUEST_BODY_TIMEOUT_SECONDS = envfloat("REQUEST_BODY_TIMEOUT_SECONDS", 30.0)
if not REQUEST_BODY_TIMEOUT_SECONDS > 0:
    raise ImproperlyConfigured("REQUEST_BODY_TIMEOUT_SECONDS must be positive")

# --- OTLP/HTTP trace receiver, POST /v1/traces (issue 15; docs/api.md "OpenTelemetry"). ---
# Exporters batch up to 512 spans and GenAI spans carry whole prompts, so the limit is larger
# than the events API's; an exporter does not retry a 413, so a too-small limit loses spans.
OTLP_MAX_BODY_BYTES = envint("OTLP_MAX_BODY_BYTES", 16_777_216)
OTLP_MAX_SPANS = envint("OTLP_MAX_SPANS", 5000)
# Tool errors that mean "rejected for its arguments" (semantic, never counted by a breaker):
# error.type / exception.type names (full or last dotted part) and HTTP statuses.
OTLP_SEMANTIC_ERROR_TYPES = envlist(
    "OTLP_SEMANTIC_ERROR_TYPES",
    ["ModelRetry", "ToolRetryError", "ValidationError", "invalid_arguments"],
)
_statuses = envlist("OTLP_SEMANTIC_HTTP_STATUSES", ["400", "404", "409", "422"])
if not all(code.isdigit() for code in _statuses):
    raise ImproperlyConfigured(f"OTLP_SEMANTIC_HTTP_STATUSES must list HTTP statuses: {_statuses}")
OTLP_SEMANTIC_HTTP_STATUSES = [int(code) for code in _statuses]
OTLP_MCP_TOOL_SPANS = envbool("OTLP_MCP_TOOL_SPANS", True)
# Result checks on a tool span's recorded result (gen_ai.tool.call.result, output.value): an
# empty or error-shaped answer is `degraded`. Tools listed here may rightly answer with nothing.
OTLP_RESULT_CHECKS = envbool("OTLP_RESULT_CHECKS", True)
OTLP_HEALTHY_EMPTY_TOOLS = envlist("OTLP_HEALTHY_EMPTY_TOOLS", [])

# --- Slack ---
SLACK_WEBHOOK_URL = envstr("SLACK_WEBHOOK_URL", "")
SLACK_TIMEOUT_SECONDS = envfloat("SLACK_TIMEOUT_SECONDS", 5.0)
# Slack accepts about one message a second per incoming webhook (GCRA limiter in Redis).
SLACK_MIN_INTERVAL_SECONDS = envfloat("SLACK_MIN_INTERVAL_SECONDS", 1.0)
# Delivery retries: exponential backoff from the base, capped, then the alert is failed.
SLACK_RETRY_BASE_SECONDS = envfloat("SLACK_RETRY_BASE_SECONDS", 1.0)
SLACK_RETRY_MAX_SECONDS = envfloat("SLACK_RETRY_MAX_SECONDS", 300.0)
SLACK_MAX_ATTEMPTS = envint("SLACK_MAX_ATTEMPTS", 12)
# Bot mode (docs/adr/0195-slack-bot-mode-one-message-per-incident.md): with a bot token every
# incident is one message in SLACK_CHANNEL, updated in place, with buttons whose presses come
# back signed to POST /slack/actions. SLACK_API_URL points slack_sdk at another Web API (the
# local stand-in in the demo and tests); https, or plain http to a loopback address.
SLACK_BOT_TOKEN = envstr("SLACK_BOT_TOKEN", "")
SLACK_SIGNING_SECRET = envstr("SLACK_SIGNING_SECRET", "")
SLACK_CHANNEL = envstr("SLACK_CHANNEL", "")
SLACK_API_URL = envstr("SLACK_API_URL", "") or "https://slack.com/api/"
# The Celery queue of Slack's interactive work (presses, card updates, answers); empty: the
# default queue. A named queue needs a worker that consumes it (celery worker -Q celery,NAME).
SLACK_TASK_QUEUE = envstr("SLACK_TASK_QUEUE", "")
# A tool opening ALERT_FLAP_COUNT times within ALERT_FLAP_WINDOW_SECONDS is flapping: one grouped
# message instead of one per opening and closing (breakers/alerts/creation.py).
ALERT_FLAP_COUNT = envint("ALERT_FLAP_COUNT", 3)
ALERT_FLAP_WINDOW_SECONDS = envfloat("ALERT_FLAP_WINDOW_SECONDS", 600.0)
# Beat's alert sweep: stuck claims, lost enqueues, the end of a flapping spell.
ALERT_SWEEP_SECONDS = envfloat("ALERT_SWEEP_SECONDS", 10.0)
CELERY_BEAT_SCHEDULE["alerts-sweep"] = {
    "task": "breakers.sweep_alerts",
    "schedule": ALERT_SWEEP_SECONDS,
    "options": {"expires": 30},
}
# Bot mode's cards whose sync was lost (a no-op without SLACK_BOT_TOKEN).
CELERY_BEAT_SCHEDULE["slack-cards-sweep"] = {
    "task": "breakers.slack_sweep_cards",
    "schedule": ALERT_SWEEP_SECONDS,
    "options": {"expires": 30},
}

# --- Health, metrics, retention (docs/operations.md) ---
# Task modules outside the apps' tasks.py: the beat heartbeat and the retention purge.
CELERY_IMPORTS = ("breakers.observability.health", "runs.retention")
# /readyz fails when the beat heartbeat (sent every fleet tick) is older than this.
HEALTH_BEAT_MAX_AGE_SECONDS = envfloat(
    "HEALTH_BEAT_MAX_AGE_SECONDS", max(15.0, 10 * BREAKER_TICK_SECONDS)
)
_INTERNAL_NETWORKS = ["127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
# Who a request came from (breakers.access.ops_endpoints): the peer, or behind one of these
# proxies (CIDRs) the address its CLIENT_ADDRESS_HEADER names. Any other forwarding header, or
# one from another peer, leaves the client unknown: then no network rule below passes.
TRUSTED_PROXIES = envlist("TRUSTED_PROXIES", [])
CLIENT_ADDRESS_HEADER = envstr("CLIENT_ADDRESS_HEADER", "") or "X-Forwarded-For"
if CLIENT_ADDRESS_HEADER.lower() not in ("x-forwarded-for", "forwarded", "x-real-ip"):
    raise ImproperlyConfigured(
        "CLIENT_ADDRESS_HEADER must be X-Forwarded-For, Forwarded or X-Real-IP, "
        f"not {CLIENT_ADDRESS_HEADER!r}"
    )
# /readyz answers requests whose client is in these networks...
HEALTH_ALLOWED_NETWORKS = envlist("HEALTH_ALLOWED_NETWORKS", _INTERNAL_NETWORKS)
# ...and /metrics those from these, or any request with "Authorization: Bearer METRICS_TOKEN".
METRICS_ALLOWED_NETWORKS = envlist("METRICS_ALLOWED_NETWORKS", ["127.0.0.0/8", "::1/128"])
METRICS_TOKEN = envstr("METRICS_TOKEN", "")
for _name in ("TRUSTED_PROXIES", "HEALTH_ALLOWED_NETWORKS", "METRICS_ALLOWED_NETWORKS"):
    try:
        [ipaddress.ip_network(cidr, strict=False) for cidr in globals()[_name]]
    except ValueError as exc:
        raise ImproperlyConfigured(f"{_name} must list networks (CIDRs): {exc}") from None
# Tool and model calls are kept this long; the ingest dedupe ledger (event ids) this long, which
# must stay longer than any client keeps resending a batch (hours).
RETENTION_CALLS_DAYS = envint("RETENTION_CALLS_DAYS", 30)
RETENTION_LEDGER_DAYS = envint("RETENTION_LEDGER_DAYS", 7)
RETENTION_BATCH_SIZE = envint("RETENTION_BATCH_SIZE", 5000)
RETENTION_MAX_BATCHES = envint("RETENTION_MAX_BATCHES", 100)
RETENTION_PURGE_SECONDS = envfloat("RETENTION_PURGE_SECONDS", 300.0)
# Slack's press records (each done press also has its audit row, which is kept).
RETENTION_SLACK_ACTIONS_DAYS = envint("RETENTION_SLACK_ACTIONS_DAYS", 30)
if RETENTION_LEDGER_DAYS * 86400 < BREAKER_DEDUPE_TTL_SECONDS or RETENTION_CALLS_DAYS < 1:
    raise ImproperlyConfigured(
        "RETENTION_LEDGER_DAYS must cover BREAKER_DEDUPE_TTL_SECONDS; RETENTION_CALLS_DAYS >= 1"
    )
if RETENTION_SLACK_ACTIONS_DAYS < 1:
    raise ImproperlyConfigured("RETENTION_SLACK_ACTIONS_DAYS must be at least 1")
CELERY_BEAT_SCHEDULE["purge-expired"] = {
    "task": "runs.purge_expired",
    "schedule": RETENTION_PURGE_SECONDS,
    "options": {"expires": RETENTION_PURGE_SECONDS},
}
CELERY_BEAT_SCHEDULE["purge-slack-actions"] = {
    "task": "breakers.purge_slack_actions",
    "schedule": RETENTION_PURGE_SECONDS,
    "options": {"expires": RETENTION_PURGE_SECONDS},
}
