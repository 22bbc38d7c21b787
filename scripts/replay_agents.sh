#!/usr/bin/env bash
# The default outage replay (all five modes) played by each agent back to back against one
# control plane of its own: the hand-written agent, then the same scripted model through Pydantic
# AI and the SDK's integration (`--agent pydantic-ai`). docs/benchmarks.md quotes both tables:
#   .venv/bin/python -m breakers.replay.check --markdown var/replay-agents/hand-written.json
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${REPLAY_AGENTS_DIR:-var/replay-agents}
PORT=${REPLAY_AGENTS_PORT:-8797}
source scripts/replay_server.sh

for agent in ${REPLAY_AGENTS:-hand-written pydantic-ai}; do
  {
    echo "== agent $agent, $(date -u +%FT%TZ)"
    machine
  } | tee "$OUT/$agent.log"
  $BIN/python manage.py simulate_outage --url "$URL" --speed "$SPEED" --agent "$agent" \
    --json "$OUT/$agent.json" ${REPLAY_ARGS:-} 2>&1 | tee -a "$OUT/$agent.log"
  machine | tee -a "$OUT/$agent.log"
done
