#!/usr/bin/env bash
# Latency from a card's release to the next step's exec: 200 one-card steps on one card.
# 1. Exactly as the issue defines it: with PTO_RUNNER_TRACE the engine logs when it releases a card and when
#    posix_spawn has exec'd the next step's shell on it (steady clock); the gap is the runner's hand-over.
# 2. End to end, as a user sees it: each step stamps the time as its first and last command; the gap between
#    one step's last stamp and the next step's first includes bash's exit and start-up and two `date` execs.
#    Baseline: the same two stamps in `bash -e -o pipefail -c` run back to back by a shell loop.
# Target: median under 5 ms.
# Usage: [SANDBOX=on] bench/release_latency.sh [build/pto-runner] [steps]   (SANDBOX: see dispatch_overhead.sh)
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
N=${2:-200}
WORK=$(mktemp -d)
source "$(dirname "$0")/sandbox_lib.sh"
trap 'sandbox_remove; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/jobs" "$WORK/toolchain" "$WORK/stamps" "$WORK/base"
cp "$(dirname "$0")/../toolchain/versions.env" "$WORK/toolchain/"
{
  echo "name: chain"
  echo "parallel: true"
  echo "steps:"
  for i in $(seq 1 "$N"); do
    echo "  - {name: s$i, devices: 1, run: 'date +%s%N > $WORK/stamps/$i.start; date +%s%N > $WORK/stamps/$i.end'}"
  done
} > "$WORK/jobs/chain.yml"
{ echo "containment: ${CONTAINMENT:-cgroup}"; sandbox_yaml "$WORK"; } > "$WORK/runner.yml"
sandbox_setup "$WORK"
chmod 1777 "$WORK/stamps" 2>/dev/null || true
PTO_RUNNER_TRACE="$WORK/trace" "$BIN" run --root "$WORK" --devices 1 --lock-dir "$WORK/locks" --state-dir "$WORK/state" > /dev/null
for i in $(seq 1 "$N"); do
  bash -e -o pipefail -c "date +%s%N > $WORK/base/$i.start; date +%s%N > $WORK/base/$i.end"
done
python3 - "$WORK" "$N" <<'PY'
import statistics, sys, os
work, n = sys.argv[1], int(sys.argv[2])
def gaps(d):
    read = lambda p: int(open(os.path.join(work, d, p)).read())
    # The runner may start steps in any order on the card; sort by start time.
    runs = sorted((read(f"{i}.start"), read(f"{i}.end")) for i in range(1, n + 1))
    return [(runs[k + 1][0] - runs[k][1]) / 1e6 for k in range(n - 1)]
q = lambda v, p: sorted(v)[int(p * (len(v) - 1))]
r, b = gaps("stamps"), gaps("base")
events = [line.split() for line in open(os.path.join(work, "trace"))]
handover, released = [], None
for kind, ns, cards in events:
    if kind == "release": released = int(ns)
    elif kind == "exec" and released is not None:
        handover.append((int(ns) - released) / 1e6)
        released = None
print(f"steps={n} on one card, sandbox={os.environ.get('SANDBOX', 'off')}")
print(f"release -> next exec (trace): median {statistics.median(handover):.3f} ms, p90 {q(handover, .9):.3f} ms, max {max(handover):.3f} ms")
print(f"shell loop (baseline): median {statistics.median(b):.2f} ms, p90 {q(b, .9):.2f} ms")
print(f"pto-runner:            median {statistics.median(r):.2f} ms, p90 {q(r, .9):.2f} ms"
      f"  (runner's own share: {statistics.median(r) - statistics.median(b):.2f} ms)")
PY
