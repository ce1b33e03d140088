#!/usr/bin/env bash
# A restart under load (issue 36): a run of 100 steps all running (each `sleep`s, held by the step
# supervisor), the daemon SIGKILLed (what the unit's restart does with SIGUSR2 leaves the same), then started
# again. Timed from exec:
#   baseline:  a start on the same state dir with nothing running (after the run);
#   takeover:  the start that takes the 100-step run over: to "listening" (the API answers), and to the
#              status showing the run's 100 steps running again under the new daemon.
# Prints each (median of ROUNDS) and takeover/baseline. Usage: bench/restart_takeover.sh [build/pto-runner] [steps] [rounds]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
N=${2:-100}
ROUNDS=${3:-3}
WORK=$(mktemp -d)
trap 'pkill -INT -f "serve --root $WORK" 2>/dev/null || true; pkill -f "supervise --dir $WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/jobs" "$WORK/toolchain"
cp "$(dirname "$0")/../toolchain/versions.env" "$WORK/toolchain/"
{ echo "name: many"; echo "parallel: true"; echo "steps:"
  for i in $(seq 1 "$N"); do echo "  - {name: s$i, run: 'sleep 8; true $i'}"; done; } > "$WORK/jobs/many.yml"
echo "sandbox: off" > "$WORK/runner.yml"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
start() {  # sets PID, and LAST to the ms from exec to "listening"
  local t0; t0=$(date +%s%N)
  "$BIN" serve --root "$WORK" --state-dir "$WORK/state" --lock-dir "$WORK/locks" --listen "127.0.0.1:$PORT" > "$WORK/out" 2> "$WORK/err" &
  PID=$!
  until grep -q listening "$WORK/out" 2>/dev/null; do
    kill -0 "$PID" 2>/dev/null || { cat "$WORK/err" >&2; exit 1; }
    sleep 0.002
  done
  LAST=$(ms "$t0")
}
running() { curl -s "$URL/api/v1/runs/$1" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(sum(s["state"]=="running" for j in r["jobs"] for s in j["steps"]))'; }
rows="$WORK/rows"
for round in $(seq 1 "$ROUNDS"); do
  rm -rf "$WORK/state" "$WORK/locks"
  start
  id=$(curl -s -X POST -H "Authorization: Bearer $(cat "$WORK/state/token")" -d '{"jobs":["many"]}' "$URL/api/v1/runs" |
       python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  until [ "$(running "$id")" -ge "$N" ]; do sleep 0.05; done
  kill -KILL "$PID"; wait "$PID" 2>/dev/null || true
  t0=$(date +%s%N)
  start; listen=$LAST
  until [ "$(running "$id")" -ge "$N" ]; do sleep 0.005; done
  taken=$(ms "$t0")
  until curl -s "$URL/api/v1/runs/$id" | grep -q '"state": *"succeeded"\|"state":"succeeded"'; do sleep 0.2; done
  kill -INT "$PID"; wait "$PID" 2>/dev/null || true
  start; base=$LAST
  kill -INT "$PID"; wait "$PID" 2>/dev/null || true
  echo "$base $listen $taken" >> "$rows"
done
python3 - "$rows" "$N" "$ROUNDS" <<'PY'
import statistics, sys
rows = [list(map(int, l.split())) for l in open(sys.argv[1])]
b, l, t = (statistics.median(r[i] for r in rows) for i in range(3))
print(f"steps running={sys.argv[2]} rounds={sys.argv[3]} (medians, ms from exec)")
print(f"  baseline start, nothing running:        {b} ms")
print(f"  start taking the run over, listening:   {l} ms  = {l / b:.2f}x baseline")
print(f"  ... and its {sys.argv[2]} steps running again: {t} ms  = {t / b:.2f}x baseline")
PY
