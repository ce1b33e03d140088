#!/usr/bin/env bash
# Issue 9 figure: a run of a commit under test, from submission to its first step's exec, with a warm mirror
# (a per-run `git worktree` of a repository the size of pypto), side by side with `git clone --depth 1` of
# the same commit from the same mirror (what a checkout per CI job costs). Alternating rounds, medians.
# Usage: bench/worktree_checkout.sh BIN [FILES] [ROUNDS]
set -euo pipefail
BIN=$(realpath "${1:?usage: worktree_checkout.sh BIN [FILES] [ROUNDS]}")
FILES=${2:-3000}
ROUNDS=${3:-5}
source "$(dirname "$0")/daemon_lib.sh"

# A repository like pypto: $FILES files of source in nested directories, 40 commits of history.
REPO=$WORK/repo
mkdir -p "$REPO/jobs" "$REPO/toolchain"
git init -q -b main "$REPO"
cp "$(dirname "$0")/../toolchain/versions.env" "$REPO/toolchain/"
python3 - "$REPO" "$FILES" <<'PY'
import os, sys, random
root, n = sys.argv[1], int(sys.argv[2])
random.seed(1)
for i in range(n):
    d = os.path.join(root, "src", f"mod{i % 40}", f"sub{i % 7}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"file{i}.py"), "w") as f:
        f.write("".join(f"def f{j}(x):\n    return x * {random.randint(0, 10**6)}\n" for j in range(60)))
PY
echo "name: first" > "$REPO/jobs/first.yml"
echo "steps: [{run: 'date +%s%N > \"\$OUT/exec-\$PTO_RUNNER_RUN_ID\"'}]" >> "$REPO/jobs/first.yml"
git -C "$REPO" add -A && git -C "$REPO" -c user.name=b -c user.email=b@b commit -qm base
for c in $(seq 1 39); do
  for k in $(seq 1 20); do echo "# change $c" >> "$REPO/src/mod$((k % 40))/sub$((k % 7))/file$((k * 7 + c)).py" 2>/dev/null || true; done
  git -C "$REPO" add -A && git -C "$REPO" -c user.name=b -c user.email=b@b commit -qm "change $c"
done
SHA=$(git -C "$REPO" rev-parse HEAD)
echo "repository: $(git -C "$REPO" ls-files | wc -l) files, $(git -C "$REPO" rev-list --count HEAD) commits, $(du -sh "$REPO/.git" | cut -f1) of history"

PROJ=$WORK/daemon
mkdir -p "$PROJ/out"
printf 'source:\n  repo: %s\n  keep-worktrees: 1000\n' "$REPO" > "$PROJ/runner.yml"
"$BIN" serve --root "$PROJ" --listen 127.0.0.1:0 --state-dir "$PROJ/state" --lock-dir "$PROJ/locks" > "$PROJ/serve.out" 2>&1 &
PID=$!
for _ in $(seq 1 100); do grep -q "listening on" "$PROJ/serve.out" && break; sleep 0.05; done
PORT=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$PROJ/serve.out" | head -1)
TOKEN=$(cat "$PROJ/state/token")
submit() {
  curl -sf -X POST -H "Authorization: Bearer $TOKEN" -d "{\"sha\":\"$SHA\",\"env\":{\"OUT\":\"$PROJ/out\"}}" \
    "http://127.0.0.1:$PORT/api/v1/runs" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'
}
# Warm the mirror (the first submission fetches; later ones find the commit there).
id=$(submit); until [[ -s "$PROJ/out/exec-$id" ]]; do sleep 0.01; done
MIRROR=$PROJ/state/source.git
git --git-dir="$MIRROR" update-ref refs/heads/main "$SHA"
git --git-dir="$MIRROR" symbolic-ref HEAD refs/heads/main

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
: > "$WORK/run.txt"; : > "$WORK/clone.txt"
for r in $(seq 1 "$ROUNDS"); do
  t0=$(date +%s%N)
  git clone -q --depth 1 "file://$MIRROR" "$WORK/clone-$r"
  echo $(( ($(date +%s%N) - t0) / 1000 )) >> "$WORK/clone.txt"
  t0=$(date +%s%N)
  id=$(submit)
  until [[ -s "$PROJ/out/exec-$id" ]]; do sleep 0.002; done
  echo $(( ($(cat "$PROJ/out/exec-$id") - t0) / 1000 )) >> "$WORK/run.txt"
  rm -rf "$WORK/clone-$r"
done
clone=$(median < "$WORK/clone.txt"); run=$(median < "$WORK/run.txt")
echo "rounds: $ROUNDS (medians)"
echo "git clone --depth 1 from the mirror:            $(awk "BEGIN{printf \"%.1f\", $clone/1000}") ms  (all: $(tr '\n' ' ' < "$WORK/clone.txt")us)"
echo "pto-runner submission -> first step exec:       $(awk "BEGIN{printf \"%.1f\", $run/1000}") ms  (all: $(tr '\n' ' ' < "$WORK/run.txt")us)"
echo "ratio (target <= 0.5x): $(awk "BEGIN{printf \"%.2f\", $run/$clone}")x"
