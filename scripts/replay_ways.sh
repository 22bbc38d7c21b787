#!/usr/bin/env bash
# `make replay-ways`: the outage replay with prompt caching on, per provider shape, mode and way
# of taking the tool away, against a control plane of its own (scripts/replay_server.sh), then
# once more beside two CPU-bound processes (REPLAY_WAYS_QUIET=0 or REPLAY_WAYS_BUSY=0 skips one;
# REPLAY_WAYS_ARGS passes options, e.g. "--mode fleet --way remove default"). Figures:
# docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-var/replay-ways}
source scripts/replay_server.sh

ways() {  # ways NAME
  { echo "== $1, $(date -u +%FT%TZ)"; machine; } | tee "$OUT/$1.log"
  $BIN/python manage.py replay_ways --url "$URL" --speed "$SPEED" --json "$OUT/$1.json" ${REPLAY_WAYS_ARGS:-} \
    2>&1 | tee -a "$OUT/$1.log"
  machine | tee -a "$OUT/$1.log"
}

if [ "${REPLAY_WAYS_QUIET:-1}" = 1 ]; then
  ways quiet
fi
if [ "${REPLAY_WAYS_BUSY:-1}" = 1 ]; then
  for _ in 1 2; do
    python3 -c 'while True: pass' &
    burners+=($!)
  done
  ways busy
fi
