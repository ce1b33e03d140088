#!/usr/bin/env bash
# GET /api/v1/tests?ref= through a real daemon over a year of test history (issue 32's figure: p99 < 100 ms).
# HISTORY is a journal filled by `build/bench/bench_test_history FILE` (~2 million rows); it is copied into
# the daemon's state dir. ROUNDS requests of each, alternating, timed by curl (time_total): the baseline is
# GET /healthz on the same daemon (what any request costs), then the ref's summary and one test's history.
# Usage: bench/tests_api.sh [build/pto-runner] [/tmp/pto-bench-history.sqlite] [rounds]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
HISTORY=${2:-/tmp/pto-bench-history.sqlite}
ROUNDS=${3:-200}
[[ -f "$HISTORY" ]] || { echo "no $HISTORY: run build/bench/bench_test_history $HISTORY first" >&2; exit 2; }
source "$(dirname "$0")/daemon_lib.sh"
mkdir -p "$WORK/p/jobs" "$WORK/p/toolchain" "$WORK/p/state"
cp "$(dirname "$0")/../toolchain/versions.env" "$WORK/p/toolchain/"
printf 'name: one\nsteps:\n  - run: "true"\n' > "$WORK/p/jobs/one.yml"
cp "$HISTORY" "$WORK/p/state/journal.sqlite"
# A year is kept (the default retention, 30 days, would prune the history at start).
printf 'tests:\n  retention-days: 400\n' > "$WORK/p/runner.yml"
start_daemon "$WORK/p" 1
# The journal's check at start reads the whole file (~1 GB): wait for it.
for _ in $(seq 1 600); do grep -q "listening on" "$WORK/p/serve.out" && break; sleep 0.1; done
PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/p/serve.out" | head -1)
[[ -n "$PORT" ]] || { cat "$WORK/p/serve.out" >&2; exit 1; }
base="http://127.0.0.1:$PORT"
id='tests%2Fst%2Fruntime%2Ftest_op_7.py%3A%3Atest_kernel%5Bcase3%5D'
: > "$WORK/t"
for _ in $(seq 1 "$ROUNDS"); do
  printf 'healthz %s\n' "$(curl -s -o /dev/null -w '%{time_total}' "$base/healthz")" >> "$WORK/t"
  printf 'ref %s\n' "$(curl -s -o "$WORK/ref.json" -w '%{time_total}' "$base/api/v1/tests?ref=refs/heads/main")" >> "$WORK/t"
  printf 'test %s\n' "$(curl -s -o /dev/null -w '%{time_total}' "$base/api/v1/tests/$id")" >> "$WORK/t"
done
python3 - "$WORK/t" "$WORK/ref.json" <<'PY'
import json, sys
rows = [l.split() for l in open(sys.argv[1])]
ref = json.load(open(sys.argv[2]))
assert ref.get("tests") == 750, ref
def pct(v, p): v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
print(f"{'':42s} {'p50 ms':>8s} {'p99 ms':>8s}")
got = {}
for kind, what in (("healthz", "baseline: GET /healthz"), ("ref", "GET /api/v1/tests?ref=refs/heads/main"), ("test", "GET /api/v1/tests/{id}")):
    v = [float(r[1]) * 1000 for r in rows if r[0] == kind]
    got[kind] = v
    print(f"{what:42s} {pct(v, .5):8.2f} {pct(v, .99):8.2f}")
print(f"ratio p99 ref / healthz: {pct(got['ref'], .99) / pct(got['healthz'], .99):.1f}x")
PY
