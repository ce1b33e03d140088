#!/usr/bin/env bash
# Dispatch overhead: 1,000 one-card steps of `true` on 8 cards through `pto-runner run`, side by side with
# `xargs -P 8` running the same 1,000 `bash -e -o pipefail -c` commands. Target: <= 1.5x xargs.
# Usage: bench/dispatch_overhead.sh [build/pto-runner] [steps]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
N=${2:-1000}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/jobs" "$WORK/toolchain"
cp "$(dirname "$0")/../toolchain/versions.env" "$WORK/toolchain/"
{
  echo "name: many"
  echo "parallel: true"
  echo "steps:"
  # Distinct commands (`true N`) so dedupe does not remove them.
  for i in $(seq 1 "$N"); do echo "  - {name: s$i, devices: 1, run: 'true $i'}"; done
} > "$WORK/jobs/many.yml"

t0=$(date +%s.%N)
seq 1 "$N" | xargs -P 8 -I{} bash -e -o pipefail -c 'true {}'
t1=$(date +%s.%N)
"$BIN" run --root "$WORK" --devices 8 --lock-dir "$WORK/locks" --state-dir "$WORK/state" > "$WORK/out.txt"
t2=$(date +%s.%N)
grep -c " succeeded " "$WORK/out.txt" > /dev/null
python3 - "$t0" "$t1" "$t2" "$N" <<'PY'
import sys
t0, t1, t2, n = map(float, sys.argv[1:])
x, p = t1 - t0, t2 - t1
print(f"steps={int(n)} cards=8")
print(f"xargs -P 8 (baseline):   {x:.3f} s  ({x / n * 1000:.2f} ms/step)")
print(f"pto-runner run:          {p:.3f} s  ({p / n * 1000:.2f} ms/step)  = {p / x:.2f}x xargs")
PY
