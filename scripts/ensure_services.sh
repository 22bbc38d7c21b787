#!/usr/bin/env bash
# Make sure PostgreSQL and Redis answer on localhost; start them where this machine can,
# otherwise say exactly what is missing.
set -euo pipefail

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null || (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

wait_for() {  # wait_for NAME CHECK: up to 15 s
  for _ in $(seq 1 30); do "$2" && return 0; sleep 0.5; done
  echo "error: $1 did not come up on localhost" >&2
  return 1
}

redis_only=false
[ "${1:-}" = "--redis-only" ] && redis_only=true  # the demo runs on SQLite

if ! $redis_only && ! pg_up; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "starting PostgreSQL…"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
    wait_for PostgreSQL pg_up
  else
    echo "error: PostgreSQL is not reachable on 127.0.0.1:5432 and cannot be started here." >&2
    echo "  Start one (trust auth for user postgres) or set TEST_DATABASE_URL=postgres://USER:PASS@HOST:PORT/DB" >&2
    exit 1
  fi
fi

if ! redis_up; then
  if command -v redis-server >/dev/null 2>&1; then
    echo "starting Redis…"
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no
    wait_for Redis redis_up
  else
    echo "error: Redis is not reachable on 127.0.0.1:6379 and redis-server is not installed." >&2
    echo "  apt-get install redis-server, or set TEST_REDIS_URL=redis://HOST:PORT/DB" >&2
    exit 1
  fi
fi
