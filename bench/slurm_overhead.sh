#!/usr/bin/env bash
# Per-step overhead through Slurm (issue 13): N one-card `true` steps via `pto-runner run` with
# `executor: slurm`, side by side with the same N `srun --gres=npu:1 true` at the same parallelism (8, the
# cards of the node) in one script, on a throw-away cluster (scripts/slurm-test-cluster.sh). Target: <= 1.2x
# raw Slurm. Rounds alternate (srun, runner, srun, runner, ...); medians printed.
# Usage: bench/slurm_overhead.sh [build/pto-runner] [steps] [rounds]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
N=${2:-200}
ROUNDS=${3:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
chmod 0755 "$WORK"  # munged wants every directory above its socket searchable by all
CLUSTER=$WORK/cluster
trap '"$HERE/../scripts/slurm-test-cluster.sh" stop "$CLUSTER" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
conf=$(SLURM_TEST_PORT=${SLURM_TEST_PORT:-6917} "$HERE/../scripts/slurm-test-cluster.sh" start "$CLUSTER")
eval "$conf"
export SLURM_CONF
# Only the 8-card node: the a5 node's 2 cards would make the runner's side wider than srun's -P 8.
scontrol update NodeName=pto-a5 State=DRAIN Reason=bench >/dev/null

mkdir -p "$WORK/p/jobs" "$WORK/p/toolchain"
cp "$HERE/../toolchain/versions.env" "$WORK/p/toolchain/"
{
  echo "name: many"
  echo "parallel: true"
  echo "steps:"
  for i in $(seq 1 "$N"); do echo "  - {name: s$i, devices: 1, run: 'true $i'}"; done
} > "$WORK/p/jobs/many.yml"
cat > "$WORK/p/runner.yml" <<YML
executor: slurm
slurm: {poll-seconds: 0.5}
devices:
  ids: [0, 1, 2, 3, 4, 5, 6, 7]
  groups: [[0, 1], [2, 3], [4, 5], [6, 7]]
  lock-dir: $WORK/locks
YML

now() { date +%s.%N; }
results="$WORK/results"
for round in $(seq 1 "$ROUNDS"); do
  t0=$(now)
  seq 1 "$N" | xargs -P 8 -I{} srun --quiet --gres=npu:1 bash -e -o pipefail -c 'true {}'
  t1=$(now)
  rm -rf "$WORK/p/state"
  "$BIN" run --root "$WORK/p" --state-dir "$WORK/p/state" > "$WORK/out.txt"
  t2=$(now)
  ok=$(grep -c " succeeded " "$WORK/out.txt" || true)
  [ "$ok" -ge "$N" ] || { echo "run did not succeed: $ok of $N steps" >&2; tail "$WORK/out.txt" >&2; exit 1; }
  echo "$t0 $t1 $t2" >> "$results"
done

python3 - "$results" "$N" "$ROUNDS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
n, rounds = int(sys.argv[2]), int(sys.argv[3])
xs = [float(r[1]) - float(r[0]) for r in rows]
ps = [float(r[2]) - float(r[1]) for r in rows]
ratios = [p / x for p, x in zip(ps, xs)]
x, p = statistics.median(xs), statistics.median(ps)
print(f"steps={n} one-card `true` steps, parallelism 8, rounds={rounds} (medians)")
print(f"  srun --gres=npu:1 (xargs -P 8, baseline): {x:.3f} s  ({x / n * 1000:.1f} ms/step)")
print(f"  pto-runner run, executor: slurm:          {p:.3f} s  ({p / n * 1000:.1f} ms/step)  = {statistics.median(ratios):.2f}x raw Slurm"
      f"  (rounds: {', '.join(f'{r:.2f}' for r in ratios)})")
PY
