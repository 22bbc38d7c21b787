#!/usr/bin/env bash
# bench/replay_ways_per_run.py against a control plane of its own (scripts/replay_server.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-var/replay-ways-per-run}
source scripts/replay_server.sh
machine
$BIN/python bench/replay_ways_per_run.py --url "$URL" --speed "$SPEED" "$@"
machine
