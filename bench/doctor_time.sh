#!/usr/bin/env bash
# `pto-runner doctor` on this host (the repository's own runner.yml-less tree: every check runs, python's and
# the /proc-free ones included), 10 runs, median; baseline in the same script: `pto-runner --version` (the
# binary's own start). Target: doctor on a full host in under a second.
# Usage: bench/doctor_time.sh [build/pto-runner]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
ROOT=$(dirname "$0")/..
python3 - "$BIN" "$ROOT" <<'PY'
import statistics, subprocess, sys, time
bin_, root = sys.argv[1], sys.argv[2]
def run(args, n=10):
    xs = []
    for _ in range(n):
        t = time.perf_counter(); subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); xs.append(time.perf_counter() - t)
    return statistics.median(xs) * 1000
base = run([bin_, "--version"])
doc = run([bin_, "--root", root, "doctor"])
print(f"pto-runner --version (baseline): {base:.1f} ms")
print(f"pto-runner doctor:               {doc:.1f} ms  = {doc / base:.1f}x the binary's own start (target: under 1000 ms)")
PY
