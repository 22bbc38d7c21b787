"""Settings that run out of the box: SQLite and localhost Redis unless the environment says so.

Every value that differs between machines comes from the environment through the strict helpers
in ``controlplane.env``. Production (DEBUG off) refuses to start with the development secret.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from controlplane.env import envbool, envfloat, envint, envlist, envstr

BASE_DIR = Path(__file__).resolve().parent.parent

DEV_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
SECRET_KEY = envstr("SECRET_KEY", DEV_SECRET_KEY)
DEBUG = envbool("DEBUG", True)
if not DEBUG and SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off (refusing the dev secret)")
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
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Every page needs a login except those marked login_not_required; /api/ uses tokens.
    "dashboard.middleware.LoginRequiredMiddleware",
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
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # Serves the plotly.min.js that ships inside the plotly package as vendor/plotly.min.js.
    "dashboard.staticfiles.PlotlyFinder",
]

SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "WARNING")},
}

# --- Breaker defaults (DESIGN.md); per-tool policies override them. ---
BREAKER_THRESHOLD = envint("BREAKER_THRESHOLD", 5)
BREAKER_COOLDOWN_SECONDS = envfloat("BREAKER_COOLDOWN_SECONDS", 30.0)
BREAKER_MAX_COOLDOWN_SECONDS = envfloat("BREAKER_MAX_COOLDOWN_SECONDS", 300.0)
BREAKER_MIN_WORKERS = envint("BREAKER_MIN_WORKERS", 2)
# Who counts towards min_workers: distinct "workers" (worker id; the default, works with one
# token shared by the fleet) or distinct agent "tokens" (one token per host: a token cannot
# forge the quorum by making up worker ids). See docs/decisions.md, trust model.
FLEET_QUORUM = envstr("FLEET_QUORUM", "workers")
if FLEET_QUORUM not in ("workers", "tokens"):
    raise ImproperlyConfigured(f"FLEET_QUORUM must be 'workers' or 'tokens', not {FLEET_QUORUM!r}")
# An outcome that happened this long before a tool's last transition is stale and ignored by the
# fleet breaker (a margin for agents' clock skew; see breakers.services._stale_before).
BREAKER_STALE_OUTCOME_SECONDS = envfloat("BREAKER_STALE_OUTCOME_SECONDS", 2.0)
# Longer than one exhausted call (31 s in the outage we design for), so a trial can finish.
BREAKER_TRIAL_LEASE_SECONDS = envfloat("BREAKER_TRIAL_LEASE_SECONDS", 120.0)
# How long Redis remembers an applied event id: longer than any client keeps resending a batch.
BREAKER_DEDUPE_TTL_SECONDS = envfloat("BREAKER_DEDUPE_TTL_SECONDS", 3600.0)
# Dotted-path prefixes a callable probe must start with, so an operator's policy cannot make the
# Celery worker import and call just anything (os.abort). Checked on save and before each call.
BREAKER_PROBE_CALLABLE_PREFIXES = envlist("BREAKER_PROBE_CALLABLE_PREFIXES", ["breakers.probes."])
# GET /api/v1/fleet?wait=N holds the request up to this long (long-poll, issue 14). Each held
# request occupies a server thread: 0 turns it off (agents then poll), as a sync-worker server must.
BREAKER_FLEET_WAIT_MAX_SECONDS = envfloat("BREAKER_FLEET_WAIT_MAX_SECONDS", 20.0)
# Held requests per server process; beyond it the answer is immediate and that agent polls.
# Keep it below the process's threads (gunicorn gthread --threads), or ingest waits behind them.
BREAKER_FLEET_MAX_WAITERS = envint("BREAKER_FLEET_MAX_WAITERS", 2)
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

# --- Slack ---
SLACK_WEBHOOK_URL = envstr("SLACK_WEBHOOK_URL", "")
SLACK_TIMEOUT_SECONDS = envfloat("SLACK_TIMEOUT_SECONDS", 5.0)
# Slack accepts about one message a second per incoming webhook (GCRA limiter in Redis).
SLACK_MIN_INTERVAL_SECONDS = envfloat("SLACK_MIN_INTERVAL_SECONDS", 1.0)
# Delivery retries: exponential backoff from the base, capped, then the alert is failed.
SLACK_RETRY_BASE_SECONDS = envfloat("SLACK_RETRY_BASE_SECONDS", 1.0)
SLACK_RETRY_MAX_SECONDS = envfloat("SLACK_RETRY_MAX_SECONDS", 300.0)
SLACK_MAX_ATTEMPTS = envint("SLACK_MAX_ATTEMPTS", 12)
# A tool opening ALERT_FLAP_COUNT times within ALERT_FLAP_WINDOW_SECONDS is flapping: one grouped
# message instead of one per opening and closing (breakers/alerts.py).
ALERT_FLAP_COUNT = envint("ALERT_FLAP_COUNT", 3)
ALERT_FLAP_WINDOW_SECONDS = envfloat("ALERT_FLAP_WINDOW_SECONDS", 600.0)
# Beat's alert sweep: stuck claims, lost enqueues, the end of a flapping spell.
ALERT_SWEEP_SECONDS = envfloat("ALERT_SWEEP_SECONDS", 10.0)
CELERY_BEAT_SCHEDULE["alerts-sweep"] = {
    "task": "breakers.sweep_alerts",
    "schedule": ALERT_SWEEP_SECONDS,
    "options": {"expires": 30},
}
