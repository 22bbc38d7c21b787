#!/usr/bin/env bash
# `make bench`: every benchmark, one after the other (each compares against a baseline measured
# in the same run; the machine is shared, so read ratios, not absolute times).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
for bench in bench_sdk bench_ingest bench_otlp bench_fleet bench_board bench_alerts bench_slack_actions bench_mcp_gateway bench_trickling_bodies; do
  [ -f "bench/$bench.py" ] || continue
  echo "=== $bench ==="
  $PY "bench/$bench.py"
done
