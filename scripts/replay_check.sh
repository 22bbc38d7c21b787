#!/usr/bin/env bash
# `make replay-check`: the default outage replay twice against a control plane of its own, once
# as the machine is and once beside two CPU-bound processes this script starts and stops. Fails
# when fleet mode's spend or vendor calls move more than 15% between the two, or fleet goes over
# 20% of mode none's spend or 60 vendor calls (breakers/replay/check.py). Then fleet mode once
# more with polling only, to count the vendor calls the fleet push saves (REPLAY_CHECK_POLL=0
# skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/replay_server.sh

replay() {  # replay NAME
  {
    echo "== $1 replay, $(date -u +%FT%TZ)"
    machine
  } | tee "$OUT/$1.log"
  $BIN/python manage.py simulate_outage --url "$URL" --speed "$SPEED" --json "$OUT/$1.json" \
    2>&1 | tee -a "$OUT/$1.log"
  machine | tee -a "$OUT/$1.log"
}

replay quiet
for _ in 1 2; do
  python3 -c 'while True: pass' &
  burners+=($!)
done
replay busy
kill "${burners[@]}"
burners=()

# What the fleet push is worth: fleet mode again with the agents polling only (not checked).
if [ "${REPLAY_CHECK_POLL:-1}" = 1 ]; then
  $BIN/python manage.py simulate_outage --url "$URL" --speed "$SPEED" --mode fleet \
    --fleet-sync poll --json "$OUT/poll.json" 2>&1 | tee "$OUT/poll.log"
fi

$BIN/python -m breakers.replay.check "$OUT/quiet.json" "$OUT/busy.json" | tee "$OUT/check.log"
if [ -f "$OUT/poll.json" ]; then
  $BIN/python -m breakers.replay.check --push-vs-poll "$OUT/quiet.json" "$OUT/poll.json" \
    | tee -a "$OUT/check.log"
fi
