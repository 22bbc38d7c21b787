#!/usr/bin/env bash
# `make demo`: the control plane on embedded defaults (SQLite, Redis on localhost), a Celery
# worker and beat, and the outage replay playing in the background so the board goes open,
# half-open and closed live. Ctrl-C stops everything this script started.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
PORT=${DEMO_PORT:-8000}
URL="http://127.0.0.1:${PORT}"
LOGS=var/demo
mkdir -p "$LOGS"
SLACK_PORT=${DEMO_SLACK_PORT:-8001}
SLACK_URL="http://127.0.0.1:${SLACK_PORT}"
export SITE_URL="$URL" DEBUG=True
# Alerts go to a local stand-in for Slack (scripts/slack_standin.py) in bot mode: one message per
# incident in #agent-tools, with buttons that act on the fleet (README, "Slack"). A real workspace:
# set SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET and SLACK_CHANNEL (or SLACK_WEBHOOK_URL) before.
if [ -z "${SLACK_BOT_TOKEN:-}${SLACK_WEBHOOK_URL:-}" ]; then
  export SLACK_BOT_TOKEN="xoxb-demo-standin"
  export SLACK_SIGNING_SECRET="demo-signing-secret-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  export SLACK_CHANNEL="#agent-tools"
  export SLACK_API_URL="$SLACK_URL/api/"
  STANDIN_BOT=1
fi
# Probes in the demo may reach local stand-ins (production refuses internal addresses).
export BREAKER_HTTP_ALLOWED_NETWORKS=${BREAKER_HTTP_ALLOWED_NETWORKS:-127.0.0.0/8,::1/128}
# The replay runs REPLAY_SPEED times faster than the story: every time setting of the control
# plane the story runs through (tick, trial lease, cooldowns, the alerts' flapping window and
# retries...) shrinks with it (simulate_outage --print-server-env computes them).
REPLAY_SPEED=${REPLAY_SPEED:-60}
eval "$($BIN/python manage.py simulate_outage --print-server-env --speed "$REPLAY_SPEED")"

pids=()
stop() {
  trap - INT TERM EXIT
  echo; echo "stopping the demo…"
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

scripts/ensure_services.sh --redis-only
$BIN/python manage.py migrate --noinput >"$LOGS/migrate.log"
$BIN/python manage.py ensure_demo_operator
if [ -n "${STANDIN_BOT:-}" ]; then
  # The stand-in's @operator acts as the demo's operator login (an admin's link, made here).
  $BIN/python manage.py link_slack_user --team T0BREAKERS --slack-user U0OPERATOR \
    --slack-name operator --username operator >/dev/null
fi

$BIN/python scripts/slack_standin.py --port "$SLACK_PORT" --actions-url "$URL/slack/actions" \
  --signing-secret "${SLACK_SIGNING_SECRET:-}" --bot-token "${SLACK_BOT_TOKEN:-}" \
  >"$LOGS/slack.log" 2>&1 &
pids+=($!)

# Django's own server (threaded) serves the static files in DEBUG; docker-compose.yml runs gunicorn.
$BIN/python manage.py runserver "127.0.0.1:${PORT}" --noreload >"$LOGS/web.log" 2>&1 &
pids+=($!)
$BIN/celery -A controlplane worker --loglevel=INFO --concurrency=2 --pool=threads \
  >"$LOGS/worker.log" 2>&1 &
pids+=($!)
$BIN/celery -A controlplane beat --loglevel=INFO --schedule "$LOGS/celerybeat-schedule" \
  >"$LOGS/beat.log" 2>&1 &
pids+=($!)

for _ in $(seq 1 60); do
  curl -fsS -o /dev/null "$URL/accounts/login/" 2>/dev/null && break
  sleep 0.5
done
echo
echo "Breaker Panel is up: $URL   (log in as operator / breaker-panel-demo)"
echo "  Slack (local stand-in, #agent-tools; act on alerts as @operator): $SLACK_URL/"
echo "  admin for channels and probes: $URL/admin/"
echo "  logs in $LOGS/"
echo "  replaying the outage in every breaker mode (about 5 minutes on 2 busy cores); watch the board"
echo "  Ctrl-C stops the web server, the Slack stand-in, the Celery worker and beat"
echo
# Process substitution, not a pipe: $! must be the replay itself, so stopping the demo stops it.
$BIN/python manage.py simulate_outage --url "$URL" --speed "$REPLAY_SPEED" --json "$LOGS/outage.json" \
  ${DEMO_REPLAY_ARGS:-} > >(tee "$LOGS/replay.log") 2>&1 &
pids+=($!)
wait "${pids[0]}"
