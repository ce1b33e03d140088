#!/usr/bin/env bash
# Daemon start with a long history (issue 12, retention): 10,000 finished runs in the state dir, `retention:
# max-runs: 100`. Three starts, each timed from exec to "listening" on stdout:
#   baseline: an empty state dir;
#   first:    the 10,000 runs (journal rebuilt from their run.json, then pruned to 100 and VACUUMed);
#   steady:   the next start, with the 100 runs retention left.
# Target: the steady start within 1 s and close to the baseline.
# Usage: bench/daemon_start.sh [build/pto-runner] [runs]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
N=${2:-10000}
WORK=$(mktemp -d)
trap 'pkill -INT -f "serve --root $WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/jobs" "$WORK/toolchain"
cp "$(dirname "$0")/../toolchain/versions.env" "$WORK/toolchain/"
printf 'name: idle\nsteps:\n  - run: "true"\n' > "$WORK/jobs/idle.yml"
printf 'retention:\n  max-runs: 100\n  max-age-days: 0\n' > "$WORK/runner.yml"
python3 - "$WORK/history/runs" "$N" <<'PY'
import json, os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    rid = "20260101-%06d-%04x" % (i // 10, i % 0x10000)
    d = os.path.join(root, rid)
    os.makedirs(os.path.join(d, "logs", "1-idle"))
    t = "2026-01-01T%02d:%02d:%02d.000Z" % (i // 3600 % 24, i // 60 % 60, i % 60)
    step = {"name": "s", "state": "succeeded", "exit_code": 0, "log_path": os.path.join(d, "logs/1-idle/1-s.log")}
    rec = {"id": rid, "state": "succeeded", "created": t, "finished": t, "result": 0,
           "request": {"jobs": [], "ref": "", "sha": "", "env": []},
           "jobs": [{"name": "idle", "state": "succeeded", "steps": [step]}]}
    with open(os.path.join(d, "run.json"), "w") as f: json.dump(rec, f)
    with open(step["log_path"], "w") as f: f.write("ok\n")
PY
start() {  # prints milliseconds from exec to "listening"
  local state=$1 t0 t1
  t0=$(date +%s%N)
  "$BIN" serve --root "$WORK" --state-dir "$state" --lock-dir "$WORK/locks" --listen 127.0.0.1:0 > "$WORK/out" 2> "$WORK/err" &
  local pid=$!
  until grep -q listening "$WORK/out" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { cat "$WORK/err" >&2; exit 1; }
    sleep 0.002
  done
  t1=$(date +%s%N)
  kill -INT "$pid"; wait "$pid" || true
  echo $(( (t1 - t0) / 1000000 ))
}
base=$(start "$WORK/empty")
first=$(start "$WORK/history")
steady=$(start "$WORK/history")
runs=$(ls "$WORK/history/runs" | wc -l)
size=$(stat -c %s "$WORK/history/journal.sqlite")
echo "baseline (empty state dir):      ${base} ms"
echo "first start with $N runs:     ${first} ms (rebuilt from run.json, pruned to $runs run dirs, journal $size bytes)"
echo "next start, 100 runs kept:       ${steady} ms"
python3 -c "print('steady / baseline: %.2fx' % (max($steady,1) / max($base,1)))"
