#!/usr/bin/env bash
# Daemon memory with 10,000 finished steps in history: 10 simulated runs of 1,000 steps, then VmRSS, side by
# side with the same daemon's VmRSS right after start. Target: < 100 MB.
# Usage: bench/history_rss.sh [build/pto-runner]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
WORK=$(mktemp -d)
cleanup() { [[ -n "${PID:-}" ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/jobs" "$WORK/toolchain"
cp "$(dirname "$0")/../toolchain/versions.env" "$WORK/toolchain/"
{ echo "name: many"; echo "parallel: true"; echo "steps:"
  for i in $(seq 1 1000); do echo "  - {name: s$i, devices: 1, expected-minutes: 1, run: 'true $i'}"; done; } > "$WORK/jobs/many.yml"
"$BIN" serve --root "$WORK" --simulate --time-scale 0.00001 --listen 127.0.0.1:0 --devices 8 \
  --state-dir "$WORK/state" --lock-dir "$WORK/locks" > "$WORK/serve.out" 2>&1 &
PID=$!
for _ in $(seq 1 100); do grep -q "listening on" "$WORK/serve.out" && break; sleep 0.05; done
PORT=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/serve.out" | head -1)
rss() { awk '/VmRSS/ {print $2/1024 " MB"}' "/proc/$PID/status"; }
START=$(rss)
for i in $(seq 1 10); do
  "$BIN" submit --server "http://127.0.0.1:$PORT" --token-file "$WORK/state/token" --wait --poll-interval 0.2 > /dev/null
done
curl -s "http://127.0.0.1:$PORT/api/v1/runs?limit=1000" > /dev/null
STEPS=$(curl -s "http://127.0.0.1:$PORT/metrics" | awk -F' ' '/^pto_runner_steps_total/ {s+=$2} END {print s}')
echo "finished steps in history: $STEPS (journal $(du -h "$WORK/state/journal.sqlite" | cut -f1))"
echo "VmRSS right after start:   $START"
echo "VmRSS with that history:   $(rss)"
