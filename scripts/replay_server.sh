# Sourced by scripts/replay_check.sh and scripts/replay_agents.sh: a control plane of the
# replay's own (Django's server on a fresh SQLite file, a Celery worker and beat, a flushed Redis
# database) keeping time with a replay at $SPEED, stopped when the sourcing script exits. Sets
# BIN, SPEED, URL, OUT, the pids/burners arrays and machine().
BIN=.venv/bin
SPEED=${REPLAY_SPEED:-60}
PORT=${PORT:-${REPLAY_CHECK_PORT:-8795}}
URL="http://127.0.0.1:${PORT}"
OUT=${OUT:-${REPLAY_CHECK_DIR:-var/replay-check}}
mkdir -p "$OUT"
# SQLite, as in `make demo` (what a new user replays on), and out of reach of anyone restarting
# the shared PostgreSQL.
export DATABASE_URL=${REPLAY_CHECK_DATABASE_URL:-sqlite:///$PWD/$OUT/db.sqlite3}
export REDIS_URL=${REPLAY_CHECK_REDIS_URL:-redis://127.0.0.1:6379/5}
export SITE_URL="$URL" DEBUG=True
# The control plane keeps time with the replay: its tick, trial lease and stale-outcome margin
# are divided by the speed (the same helper the replay checks its own settings against).
eval "$($BIN/python manage.py simulate_outage --print-server-env --speed "$SPEED")"

pids=()
burners=()
stop() {
  trap - INT TERM EXIT
  for pid in "${burners[@]}" "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

scripts/ensure_services.sh --redis-only
# A fresh database and Redis database each time: the check must not depend on what ran before.
rm -f "$OUT"/db.sqlite3*
$BIN/python -c 'import os, redis; redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()'
$BIN/python manage.py migrate --noinput >"$OUT/migrate.log"

$BIN/python manage.py runserver "127.0.0.1:${PORT}" --noreload >"$OUT/web.log" 2>&1 &
pids+=($!)
$BIN/celery -A controlplane worker --loglevel=WARNING --concurrency=2 --pool=threads \
  -n "replay-check@%h" >"$OUT/worker.log" 2>&1 &
pids+=($!)
$BIN/celery -A controlplane beat --loglevel=WARNING --schedule "$OUT/celerybeat-schedule" \
  >"$OUT/beat.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  curl -fsS -o /dev/null "$URL/accounts/login/" 2>/dev/null && break
  sleep 0.5
done

machine() {  # what else is running: the machine is shared
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
  echo "busiest processes (%CPU, command):"
  ps -eo pcpu=,args= --sort=-pcpu | head -8 | cut -c1-110 | sed 's/^/  /'
}

