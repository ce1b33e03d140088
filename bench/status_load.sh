#!/usr/bin/env bash
# GET /api/v1/status throughput and p99 latency over 64 connections (wrk, 2 threads, 10 s) while a simulated
# run of 1,000 steps is active on 8 cards; the baseline in the same script is /healthz (the cheapest route)
# on the same daemon at the same moment. Target: >= 10,000 req/s, p99 < 10 ms.
# Usage: bench/status_load.sh [build/pto-runner]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
command -v wrk >/dev/null || { echo "wrk is missing: scripts/install-deps.sh installs it"; exit 2; }
source "$(dirname "$0")/daemon_lib.sh"
make_many_steps "$WORK" 2
start_daemon "$WORK" 0.002
"$BIN" submit --server "http://127.0.0.1:$PORT" --token-file "$WORK/state/token" > /dev/null
sleep 1
BYTES=$(curl -s "http://127.0.0.1:$PORT/api/v1/status" | wc -c)
QUEUE=$(curl -s "http://127.0.0.1:$PORT/api/v1/status" | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["queue_total"], sum(1 for d in s["devices"] if d["state"]=="busy"))')
wrk -t2 -c64 -d10s --latency "http://127.0.0.1:$PORT/api/v1/status" > "$WORK/status.txt"
wrk -t2 -c64 -d10s --latency "http://127.0.0.1:$PORT/healthz" > "$WORK/healthz.txt"
ACTIVE=$(curl -s "http://127.0.0.1:$PORT/api/v1/status" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["active_runs"]))')
summ() { awk -v name="$1" '/Requests\/sec/ {r=$2} /^ +99%/ {p=$2} END {printf "%-28s %10s req/s   p99 %s\n", name, r, p}' "$2"; }
echo "status body: $BYTES bytes; queue waiting/busy cards at start: $QUEUE; run still active after: $ACTIVE"
summ "GET /healthz (baseline)" "$WORK/healthz.txt"
summ "GET /api/v1/status" "$WORK/status.txt"
