#!/usr/bin/env bash
# Play-to-play spread of `make replay-ways`: the same plays N times, each against a fresh control
# plane of its own (scripts/replay_ways.sh, quiet only), results in var/spread-1..N/quiet.json.
# Usage: bench/replay_ways_spread.sh N [replay_ways options], e.g.
#   bench/replay_ways_spread.sh 4 --provider anthropic --mode worker --way remove default
# then bench/replay_ways_spread.py var/spread-*/quiet.json for the table.
set -euo pipefail
cd "$(dirname "$0")/.."
n=$1
shift
for i in $(seq 1 "$n"); do
  echo "== play $i of $n, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  REPLAY_WAYS_BUSY=0 REPLAY_WAYS_ARGS="$*" OUT="var/spread-$i" scripts/replay_ways.sh
  echo "== end of play $i, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
done
