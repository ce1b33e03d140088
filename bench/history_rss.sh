#!/usr/bin/env bash
# Daemon memory with 10,000 finished steps in history: 10 simulated runs of 1,000 steps, then VmRSS, side by
# side with the same daemon's VmRSS right after start. Target: < 100 MB.
# Usage: bench/history_rss.sh [build/pto-runner]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
source "$(dirname "$0")/daemon_lib.sh"
make_many_steps "$WORK" 1
start_daemon "$WORK" 0.00001
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
