#!/usr/bin/env bash
# The spend rule in the outage replay: the fleet mode once per spend amount (0: off, the
# consecutive rule alone) against one control plane of its own, and when the fleet breaker
# opened web_search in each (simulated seconds after the outage began). docs/benchmarks.md
# quotes the table it prints. Amounts: REPLAY_SPEND_AMOUNTS (USD), default "0 0.05 0.1 0.25 1".
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${REPLAY_SPEND_DIR:-var/replay-spend}
PORT=${REPLAY_SPEND_PORT:-8798}
source scripts/replay_server.sh

machine | tee "$OUT/machine-before.log"
for amount in ${REPLAY_SPEND_AMOUNTS:-0 0.05 0.1 0.25 1}; do
  $BIN/python manage.py simulate_outage --url "$URL" --speed "$SPEED" --mode fleet \
    --spend-amount "$amount" --json "$OUT/spend-$amount.json" ${REPLAY_ARGS:-} \
    >"$OUT/spend-$amount.log" 2>&1
  tail -n 1 "$OUT/spend-$amount.log"
done
machine | tee "$OUT/machine-after.log"
$BIN/python - "$OUT" ${REPLAY_SPEND_AMOUNTS:-0 0.05 0.1 0.25 1} <<'PY'
import json, sys
out, amounts = sys.argv[1], sys.argv[2:]
rows = []
for amount in amounts:
    with open(f"{out}/spend-{amount}.json") as f:
        (fleet,) = json.load(f)["modes"]
    rows.append((amount, fleet.get("fleet_opened_s"), fleet.get("fleet_opened_by"), fleet))
base = rows[0][1]
print("| spend amount | opened (s after the outage began) | by | earlier than the streak | spend $ | search calls |")
print("|---|---|---|---|---|---|")
for amount, opened, rule, fleet in rows:
    label = "off" if float(amount) == 0 else f"${float(amount):.2f}"
    earlier = "" if opened is None or base is None or float(amount) == 0 else f"{base - opened:+.0f} s"
    shown = "never" if opened is None else f"{opened:.0f}"
    print(f"| {label} | {shown} | {rule or '-'} | {earlier} | {fleet['model_spend_usd']:.2f} | {fleet['web_search_calls']} |")
PY
