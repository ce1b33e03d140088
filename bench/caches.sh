#!/usr/bin/env bash
# Caches scoped by trust (issue 50): the shipped build job's shape (a CMake build through ccache, `caches:
# {ccache: CCACHE_DIR}`) on a 50-source project, through `pto-runner run` as main (cold, then warm) and as a
# pull request (warm from main's tier), side by side with plain ccache on one CCACHE_DIR in the same script.
# Targets: a warm pull-request build within 1.2x of a warm plain ccache build; the caches' cost per step
# (tiers made, variables set, the statistics log read) under 50 ms.
# Usage: [SANDBOX=on] bench/caches.sh [build/pto-runner] [rounds]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
ROUNDS=${2:-3}
WORK=$(mktemp -d)
source "$(dirname "$0")/sandbox_lib.sh"
trap 'sandbox_remove; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
command -v ccache > /dev/null || { echo "ccache is needed (apt-get install ccache)" >&2; exit 2; }

PROJ="$WORK/proj"
mkdir -p "$PROJ"
{
  echo "cmake_minimum_required(VERSION 3.16)"
  echo "project(fifty CXX)"
  printf 'add_library(fifty STATIC'
  for i in $(seq 0 49); do printf ' s%d.cpp' "$i"; done
  echo ")"
} > "$PROJ/CMakeLists.txt"
for i in $(seq 0 49); do
  printf '#include <map>\n#include <string>\nint f%d(int x) { std::map<std::string, int> m; m["k"] = x; return m["k"] + %d; }\n' "$i" "$i" > "$PROJ/s$i.cpp"
done

now() { date +%s.%N; }
misses_of_log() { grep -c '^cache_miss$' "$1" || true; }

# Plain ccache: one CCACHE_DIR, a fresh build tree each time (as each run has its own).
plain_build() {  # $1 = stats log; prints seconds
  local b t0
  b=$(mktemp -d "$WORK/plain-b.XXXX")
  t0=$(now)
  CCACHE_DIR="$WORK/plain-ccache" CCACHE_STATSLOG="$1" cmake -S "$PROJ" -B "$b" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache > /dev/null
  CCACHE_DIR="$WORK/plain-ccache" CCACHE_STATSLOG="$1" cmake --build "$b" -j 2 > /dev/null
  echo "$(now) - $t0" | bc
  rm -rf "$b"
}

# The same build as a pto-runner job.
ROOT="$WORK/root"
mkdir -p "$ROOT/jobs" "$ROOT/toolchain"
cp "$(dirname "$0")/../toolchain/versions.env" "$ROOT/toolchain/"
cat > "$ROOT/jobs/build.yml" <<EOF
name: build
caches: {ccache: CCACHE_DIR}
steps:
  - name: build
    run: |
      b=\$(mktemp -d)
      cmake -S $PROJ -B "\$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache > /dev/null
      cmake --build "\$b" -j 2 > /dev/null
      rm -rf "\$b"
      echo "MISSES \$(grep -c '^cache_miss\$' "\$CCACHE_STATSLOG" || true) CALLS \$(grep -c '^# ' "\$CCACHE_STATSLOG" || true)"
EOF
# The caches' own cost: 20 steps that do nothing, with and without a cache.
for with in yes no; do
  {
    echo "name: noop-$with"
    [ "$with" = yes ] && echo "caches: {ccache: CCACHE_DIR}"
    echo "steps:"
    for i in $(seq 1 20); do echo "  - {name: n$i, run: 'true $i'}"; done
  } > "$ROOT/jobs/noop-$with.yml"
done
# And what a run costs that builds nothing (its start, plan and end): one no-op step.
printf "name: empty\nsteps:\n  - {name: e, run: 'true'}\n" > "$ROOT/jobs/empty.yml"
{ sandbox_yaml "$ROOT"; } > "$ROOT/runner.yml"
sandbox_setup "$ROOT"
chmod 0755 "$PROJ"

runner() {  # $1 = ref, $2 = job; prints "seconds misses calls"
  local t0 t1 rec
  t0=$(now)
  GITHUB_REF="$1" "$BIN" run --root "$ROOT" --devices 8 --lock-dir "$WORK/locks" --state-dir "$WORK/state" --job "$2" > "$WORK/out.txt" 2>&1 \
    || { cat "$WORK/out.txt" >&2; exit 1; }
  t1=$(now)
  # `run` keeps no run.json: the build step says what its ccache did (from its CCACHE_STATSLOG).
  rec=$(grep -h '^MISSES ' $(ls -td "$WORK"/state/runs/*/ | head -1)logs/*/*.log 2>/dev/null || echo "MISSES 0 CALLS 0")
  echo "$(echo "$t1 - $t0" | bc) $(echo "$rec" | awk '{print $2, $4}')"
}

results="$WORK/results"
plain_cold=$(plain_build "$WORK/plain-cold.log")
echo "plain-cold $plain_cold $(misses_of_log "$WORK/plain-cold.log")" >> "$results"
echo "main-cold $(runner refs/heads/main build)" >> "$results"
for r in $(seq 1 "$ROUNDS"); do
  rm -f "$WORK/plain-warm.log"
  echo "plain-warm $(plain_build "$WORK/plain-warm.log") $(misses_of_log "$WORK/plain-warm.log")" >> "$results"
  echo "main-warm $(runner refs/heads/main build)" >> "$results"
  echo "pr-warm $(runner "refs/pull/$r/head" build)" >> "$results"
  echo "noop-yes $(runner refs/heads/main noop-yes)" >> "$results"
  echo "noop-no $(runner refs/heads/main noop-no)" >> "$results"
  echo "empty $(runner refs/heads/main empty)" >> "$results"
done

python3 - "$results" "$ROUNDS" <<'PY'
import statistics, sys, os
rows = [l.split() for l in open(sys.argv[1])]
def med(kind, col=1): return statistics.median(float(r[col]) for r in rows if r[0] == kind)
print(f"50-source CMake build through ccache, rounds={sys.argv[2]} sandbox={os.environ.get('SANDBOX', 'off')} (medians; compiler runs = ccache misses)")
for kind, what in (("plain-cold", "plain ccache, cold"), ("plain-warm", "plain ccache, warm"), ("main-cold", "pto-runner run, main, cold"),
                   ("main-warm", "pto-runner run, main, warm"), ("pr-warm", "pto-runner run, a pull request's first run")):
    print(f"  {what:44s} {med(kind):7.2f} s  {int(med(kind, 2)):3d} compiler runs")
print(f"  pull request warm / plain warm: {med('pr-warm') / med('plain-warm'):.2f}x  (target <= 1.2x; the run's own start is in it)")
print(f"  main warm / plain warm:         {med('main-warm') / med('plain-warm'):.2f}x")
e = med('empty')
print(f"  a run that builds nothing takes {e:.2f} s; without it: pull request {(med('pr-warm') - e) / med('plain-warm'):.2f}x,"
      f" main {(med('main-warm') - e) / med('plain-warm'):.2f}x plain warm")
per_step = (med('noop-yes') - med('noop-no')) / 20 * 1000
print(f"  the caches' cost per step: {per_step:.1f} ms  (20 no-op steps with a cache against without; target < 50 ms)")
PY
