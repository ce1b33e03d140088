#!/usr/bin/env bash
# Issue 11 figures: (1) 1,000 `task-submit --device-num 1 --run true` on 8 cards through the daemon, 8 at a
# time, side by side with `xargs -P 8` running the same `bash -c true` directly (the incumbent polls its queue
# every 200 ms per task); (2) lease grant on a free card, from the client's start to the command's exec.
# Alternating rounds, medians.
# Usage: bench/lease_throughput.sh BIN [N] [ROUNDS]
set -euo pipefail
BIN=$(realpath "${1:?usage: lease_throughput.sh BIN [N] [ROUNDS]}")
N=${2:-1000}
ROUNDS=${3:-3}
source "$(dirname "$0")/daemon_lib.sh"
mkdir -p "$WORK/p/jobs" "$WORK/p/toolchain" "$WORK/bin"
cp "$(dirname "$0")/../toolchain/versions.env" "$WORK/p/toolchain/"
printf 'name: idle\nsteps:\n  - run: "true"\n' > "$WORK/p/jobs/idle.yml"
ln -s "$(dirname "$BIN")/pto-task-submit" "$WORK/bin/task-submit"
"$BIN" serve --root "$WORK/p" --listen 127.0.0.1:0 --devices 8 --state-dir "$WORK/p/state" --lock-dir "$WORK/p/locks" \
  > "$WORK/p/serve.out" 2>&1 &
PID=$!
for _ in $(seq 1 100); do grep -q "listening on" "$WORK/p/serve.out" && break; sleep 0.05; done
PORT=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/p/serve.out" | head -1)
export PTO_RUNNER_SERVER=http://127.0.0.1:$PORT PTO_RUNNER_TOKEN=$(cat "$WORK/p/state/token")
cd "$WORK"  # no runner.yml here: the client finds the daemon from $PTO_RUNNER_SERVER

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
now() { date +%s%N; }
: > x.txt; : > t.txt
for r in $(seq 1 "$ROUNDS"); do
  t0=$(now); seq "$N" | xargs -P 8 -I{} bash -c true; echo $(( ($(now) - t0) / 1000000 )) >> x.txt
  t0=$(now); seq "$N" | xargs -P 8 -I{} "$WORK/bin/task-submit" --device-num 1 --run true; echo $(( ($(now) - t0) / 1000000 )) >> t.txt
done
x=$(median < x.txt); t=$(median < t.txt)
echo "$N commands, 8 at a time, $ROUNDS rounds (medians)"
echo "xargs -P 8 bash -c true:                         $x ms  (all: $(tr '\n' ' ' < x.txt))"
echo "xargs -P 8 task-submit --device-num 1 --run true: $t ms  (all: $(tr '\n' ' ' < t.txt))"
echo "ratio (target <= 2x): $(awk "BEGIN{printf \"%.2f\", $t/$x}")x"

# Grant latency on a free card: from the client's start to the command's first instruction (its own
# `date`), beside the same command started by the shell directly: the difference is task-submit's part
# (its start, the lease round trip, the daemon's scheduling and flock, the spawn). Beside them the same
# client with --no-device (its start and the spawn, no lease): what is left is the lease's own part, which
# does not grow with what a process start costs on the machine.
: > g.txt; : > b.txt; : > n.txt
for i in $(seq 1 50); do
  t0=$(now); bash -c 'date +%s%N > start'; echo $(( ($(cat start) - t0) / 1000 )) >> b.txt
  t0=$(now); "$WORK/bin/task-submit" --device-num 1 --run 'date +%s%N > start' >/dev/null
  echo $(( ($(cat start) - t0) / 1000 )) >> g.txt
  t0=$(now); "$WORK/bin/task-submit" --no-device --run 'date +%s%N > start' >/dev/null
  echo $(( ($(cat start) - t0) / 1000 )) >> n.txt
done
g=$(median < g.txt); b=$(median < b.txt); n=$(median < n.txt)
ms() { awk "BEGIN{printf \"%.2f\", ($1)/1000}"; }
echo "lease grant, client start -> command exec, 50 runs: median $(ms "$g") ms;" \
     "the same command from the shell: $(ms "$b") ms; task-submit's part: $(ms "$g-$b") ms"
echo "  of which the client's start and spawn (task-submit --no-device: $(ms "$n") ms): $(ms "$n-$b") ms;" \
     "the lease's own (round trip, the daemon's grant, the cgroup): $(ms "$g-$n") ms"
