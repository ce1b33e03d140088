#!/usr/bin/env bash
# Notifications do not slow dispatch (issue 35): a daemon runs one run of the main branch with 1,000 one-card
# `true` steps and, beside them, 100 failing steps (each a `main-red` event); with a webhook receiver that
# answers every message after 2 s, against the same daemon with no receiver. Real steps on 8 cards (not
# simulated), alternating rounds; medians of the run's own duration (created to finished).
# Usage: bench/notify_overhead.sh [build/pto-runner] [rounds]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
ROUNDS=${2:-3}
source "$(dirname "$0")/daemon_lib.sh"
mkdir -p "$WORK/p/jobs" "$WORK/p/toolchain"
cp "$(dirname "$0")/../toolchain/versions.env" "$WORK/p/toolchain/"
# Job `many`: 1,000 one-card `true` steps (what is timed, as bench/dispatch_overhead.sh); job `red`: 100 legs
# failing at once beside it on the same cards, 100 main-red events for the notifier while `many` dispatches.
{ echo "name: many"; echo "parallel: true"; echo "steps:"
  for i in $(seq 1 1000); do echo "  - {name: s$i, devices: 1, run: 'true $i'}"; done; } > "$WORK/p/jobs/many.yml"
{ echo "name: red"; echo "strategy:"; echo "  fail-fast: false"; echo "  matrix:"; echo "    n: [$(seq -s, 1 100)]"
  echo "steps:"; echo "  - {name: fails, devices: 1, retry: {max: 0}, run: 'exit 1'}"; } > "$WORK/p/jobs/red.yml"
# The slow receiver: every POST answered after 2 s.
cat > "$WORK/slow.py" <<'PY'
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        time.sleep(2)
        self.send_response(200); self.end_headers()
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1])); s.serve_forever()
PY
python3 "$WORK/slow.py" "$WORK/slow.port" & RECEIVER=$!
trap 'kill $RECEIVER 2>/dev/null; cleanup' EXIT
for _ in $(seq 1 100); do [ -s "$WORK/slow.port" ] && break; sleep 0.05; done
one_round() {  # $1 = on|off: prints the seconds from submit to the run's end
  rm -rf "$WORK/p/state" "$WORK/p/locks"
  if [ "$1" = on ]; then
    printf 'sandbox: off\nnotify:\n  receivers:\n    - {name: slow, kind: webhook, url: "http://127.0.0.1:%s/hook"}\n' "$(cat "$WORK/slow.port")" > "$WORK/p/runner.yml"
  else
    printf 'sandbox: off\n' > "$WORK/p/runner.yml"
  fi
  "$BIN" serve --root "$WORK/p" --listen 127.0.0.1:0 --devices 8 --state-dir "$WORK/p/state" --lock-dir "$WORK/p/locks" > "$WORK/serve.out" 2>&1 &
  PID=$!
  for _ in $(seq 1 200); do grep -q "listening on" "$WORK/serve.out" && break; sleep 0.05; done
  PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/serve.out" | head -1)
  local id times pending
  id=$(curl -s -X POST -H "Authorization: Bearer $(cat "$WORK/p/state/token")" -d '{"ref": "refs/heads/main"}' \
    "http://127.0.0.1:$PORT/api/v1/runs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  for _ in $(seq 1 1200); do
    times=$(curl -s "http://127.0.0.1:$PORT/api/v1/runs/$id" | python3 -c '
import json, sys, datetime
r = json.load(sys.stdin)
if r["state"] in ("running", "cancelling"): sys.exit(0)
t = lambda s: datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
print(t(r["created"]), t(r["finished"]))')
    [ -n "$times" ] && break
    sleep 0.2
  done
  pending=$(curl -s "http://127.0.0.1:$PORT/api/v1/status" | python3 -c 'import json,sys; n=json.load(sys.stdin)["notify"]; print(n[0]["pending"] if n else 0)')
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
  echo "$times $pending"
}
for r in $(seq 1 "$ROUNDS"); do
  echo "off $(one_round off)" >> "$WORK/results"
  echo "on $(one_round on)" >> "$WORK/results"
done
python3 - "$WORK/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
off = [float(r[2]) - float(r[1]) for r in rows if r[0] == "off"]
on = [float(r[2]) - float(r[1]) for r in rows if r[0] == "on"]
pending = [int(r[3]) for r in rows if r[0] == "on"]
ratios = [b / a for a, b in zip(off, on)]
print("1,000 one-card steps and 100 failing ones (main-red events) on 8 cards, the run's duration (rounds: %d)" % len(off))
print("  no receiver:                          %.3f s" % statistics.median(off))
print("  a webhook answering in 2 s:           %.3f s  = %.2fx  (rounds: %s)" % (statistics.median(on), statistics.median(ratios),
      ", ".join("%.2f" % r for r in ratios)))
print("  events still in the outbox at the run's end: %s (delivered later, never in the run's way)" % ", ".join(map(str, pending)))
PY
