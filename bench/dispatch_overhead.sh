#!/usr/bin/env bash
# Dispatch overhead: N one-card steps on 8 cards through `pto-runner run`, side by side with `xargs -P 8`
# running the same `bash -e -o pipefail -c` commands. Target (issue 3a): <= 1.5x xargs for `true`.
#
# Two workloads, each in ROUNDS alternating rounds (xargs, runner, xargs, runner, ...), medians printed:
#   silent:  `true N`    - the issue's workload; xargs writes nothing.
#   output:  `echo N`    - every step prints a line; xargs redirects each command into its own file, as the
#                          runner writes each step's log, so both pay for creating one file per step.
# Usage: [CONTAINMENT=cgroup|sweep] [SANDBOX=on] [SERVE=on [SUPERVISE=off]] bench/dispatch_overhead.sh [build/pto-runner] [steps] [rounds]
# (SERVE=on: the same run through a daemon, `submit --wait` timed; its steps held by the host's supervisor,
# or with SUPERVISE=off the daemon's own children.)
# (CONTAINMENT writes runner.yml `containment:`; cgroup, the default, falls back to sweep where the host has
# no writable cgroup v2. SANDBOX=on, as root: every step runs as a sandbox user, within pids-max and
# memory-max, given its card's file by ACL: the cost of the uid switch and the grant per step.)
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
N=${2:-1000}
ROUNDS=${3:-3}
WORK=$(mktemp -d)
source "$(dirname "$0")/sandbox_lib.sh"
trap 'sandbox_remove; rm -rf "$WORK"' EXIT

make_project() {  # $1 = dir, $2 = command word
  mkdir -p "$1/jobs" "$1/toolchain"
  cp "$(dirname "$0")/../toolchain/versions.env" "$1/toolchain/"
  {
    echo "name: many"
    echo "parallel: true"
    echo "steps:"
    # Distinct commands so dedupe does not remove them.
    for i in $(seq 1 "$N"); do echo "  - {name: s$i, devices: 1, run: '$2 $i'}"; done
  } > "$1/jobs/many.yml"
  { echo "containment: ${CONTAINMENT:-cgroup}"; [ "${SUPERVISE:-on}" = off ] && echo "supervise: false"; sandbox_yaml "$1"; } > "$1/runner.yml"
}
make_project "$WORK/silent" true
make_project "$WORK/output" echo
sandbox_setup "$WORK/silent" "$WORK/output"

now() { date +%s.%N; }
results="$WORK/results"
for round in $(seq 1 "$ROUNDS"); do
  for kind in silent output; do
    rm -rf "$WORK/xlogs" && mkdir -p "$WORK/xlogs"
    t0=$(now)
    if [ "$kind" = silent ]; then
      seq 1 "$N" | xargs -P 8 -I{} bash -e -o pipefail -c 'true {}'
    else
      seq 1 "$N" | xargs -P 8 -I{} bash -e -o pipefail -c "echo {} > $WORK/xlogs/{}.log"
    fi
    t1=$(now)
    rm -rf "$WORK/$kind/state" "$WORK/$kind/locks"
    if [ "${SERVE:-off}" = on ]; then
      # The daemon (its steps held by its supervisor unless SUPERVISE=off): timed from the submission to the
      # run's end, its start left out (bench/daemon_start.sh measures that).
      "$BIN" serve --root "$WORK/$kind" --listen 127.0.0.1:0 --devices 8 --lock-dir "$WORK/$kind/locks" \
        --state-dir "$WORK/$kind/state" > "$WORK/serve.out" 2>&1 &
      spid=$!
      for _ in $(seq 1 200); do grep -q "listening on" "$WORK/serve.out" && break; sleep 0.05; done
      port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/serve.out" | head -1)
      t1=$(now)
      "$BIN" submit --server "http://127.0.0.1:$port" --token-file "$WORK/$kind/state/token" --wait --poll-interval ${POLL:-0.05} \
        > "$WORK/out.txt" 2>&1 || { cat "$WORK/out.txt" >&2; kill "$spid"; exit 1; }
      t2=$(now)
      kill -TERM "$spid"; wait "$spid" || true
    else
      "$BIN" run --root "$WORK/$kind" --devices 8 --lock-dir "$WORK/$kind/locks" --state-dir "$WORK/$kind/state" \
        > "$WORK/out.txt"
      t2=$(now)
      ok=$(grep -c " succeeded " "$WORK/out.txt" || true)
      [ "$ok" -ge "$N" ] || { echo "run did not succeed: $ok of $N steps" >&2; exit 1; }
    fi
    echo "$kind $t0 $t1 $t2" >> "$results"
  done
done

python3 - "$results" "$N" "$ROUNDS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
n, rounds = int(sys.argv[2]), int(sys.argv[3])
import os
print(f"steps={n} cards=8 rounds={rounds} sandbox={os.environ.get('SANDBOX', 'off')} serve={os.environ.get('SERVE', 'off')}"
      f" supervise={os.environ.get('SUPERVISE', 'on') if os.environ.get('SERVE') == 'on' else 'n/a'} (medians; ratio = median of per-round ratios)")
for kind, what in (("silent", "`true N`"), ("output", "`echo N`, one file per step on both sides")):
    xs = [float(r[2]) - float(r[1]) for r in rows if r[0] == kind]
    ps = [float(r[3]) - float(r[2]) for r in rows if r[0] == kind]
    ratios = [p / x for p, x in zip(ps, xs)]
    x, p = statistics.median(xs), statistics.median(ps)
    print(f"{kind:7s} {what}")
    print(f"  xargs -P 8 (baseline): {x:.3f} s  ({x / n * 1000:.2f} ms/step)")
    print(f"  pto-runner run:        {p:.3f} s  ({p / n * 1000:.2f} ms/step)  = {statistics.median(ratios):.2f}x xargs"
          f"  (rounds: {', '.join(f'{r:.2f}' for r in ratios)})")
PY
