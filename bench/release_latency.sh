#!/usr/bin/env bash
# Latency from a card's release to the next step's exec: 200 one-card steps on one card. Each step stamps
# the time as its first and last command; the gap between one step's last stamp and the next step's first
# stamp is process exit + reap + sweep + release + scheduling + fork/exec of bash and date.
# Baseline in the same script: the same two stamps in `bash -e -o pipefail -c` run back to back by a shell
# loop (fork/exec with no runner in between). Target: median under 5 ms.
# Usage: bench/release_latency.sh [build/pto-runner] [steps]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
N=${2:-200}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
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
"$BIN" run --root "$WORK" --devices 1 --lock-dir "$WORK/locks" --state-dir "$WORK/state" > /dev/null
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
r, b = gaps("stamps"), gaps("base")
q = lambda v, p: sorted(v)[int(p * (len(v) - 1))]
print(f"steps={n} on one card")
print(f"shell loop (baseline): median {statistics.median(b):.2f} ms, p90 {q(b, .9):.2f} ms")
print(f"pto-runner:            median {statistics.median(r):.2f} ms, p90 {q(r, .9):.2f} ms"
      f"  (runner's own share: {statistics.median(r) - statistics.median(b):.2f} ms)")
PY
