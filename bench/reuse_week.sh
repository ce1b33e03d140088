#!/usr/bin/env bash
# Nothing run twice (issue 51): a simulated week of pypto's CI through a real daemon with `source:` and a real
# git repository, once with reuse and once with every run submitted `--no-reuse`, in one script. Card time is
# what the device steps that really ran held (their duration times their cards, from each run's JSON).
# The week's shape (assumed, stated here; pypto's own history is not reachable from this machine):
#   PRS pull requests (default 20), each: a first push changing src/; with probability 0.3 a re-push of the
#   same tree (a reworded commit message, a rebase with nothing new); 15% of pull requests change docs/ only;
#   10% have a first push that breaks a test (red), then a push that fixes it;
#   then the merge: main's run of a merge commit whose tree is the pull request's last.
# The jobs: build (no card, reuse: false), system tests (2 steps of 2 cards), models (2 steps of 1 card);
# the tests' inputs leave docs/ out, as the shipped definitions' do. Steps sleep 0.2 s.
# Target: at least 30% fewer card-hours with reuse, no red result hidden: every run's result (submit's exit) is the
# same with reuse as without.
# Usage: bench/reuse_week.sh [build/pto-runner] [prs]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
PRS=${2:-20}
WORK=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT

REPO="$WORK/repo"
git init -q -b main "$REPO"
mkdir -p "$REPO/jobs" "$REPO/toolchain" "$REPO/src" "$REPO/docs"
cp "$(dirname "$0")/../toolchain/versions.env" "$REPO/toolchain/"
cat > "$REPO/jobs/build.yml" <<'EOF'
name: build
reuse: false
steps:
  - run: sleep 0.2
EOF
cat > "$REPO/jobs/system-tests.yml" <<'EOF'
name: system-tests
needs: [build]
parallel: true
reuse:
  inputs: ['**', '!docs/**']
steps:
  - {name: shard-a, devices: 2, run: 'sleep 0.2; test ! -e src/BROKEN'}
  - {name: shard-b, devices: 2, run: 'sleep 0.2; echo b'}
EOF
cat > "$REPO/jobs/models.yml" <<'EOF'
name: models
needs: [build]
parallel: true
reuse:
  inputs: ['**', '!docs/**']
steps:
  - {name: qwen3, devices: 1, run: 'sleep 0.2'}
  - {name: moe, devices: 1, run: 'sleep 0.2; echo moe'}
EOF
echo "int v0;" > "$REPO/src/a.c"
echo "# docs" > "$REPO/docs/index.md"
git_commit() { git -C "$REPO" add -A && git -C "$REPO" -c user.name=b -c user.email=b@example.com commit -q --allow-empty -m "$1" && git -C "$REPO" rev-parse HEAD; }
git_commit base > /dev/null

# The week's pushes, seeded: "sha ref" lines.
RANDOM=20261205
events="$WORK/events"
for pr in $(seq 1 "$PRS"); do
  if [ $((RANDOM % 100)) -lt 15 ]; then echo "pr $pr" >> "$REPO/docs/index.md"; else echo "int v$pr;" >> "$REPO/src/a.c"; fi
  if [ $((RANDOM % 100)) -lt 10 ]; then
    touch "$REPO/src/BROKEN"
    echo "$(git_commit "pr $pr, broken") refs/pull/$pr/merge" >> "$events"
    rm "$REPO/src/BROKEN"
  fi
  echo "$(git_commit "pr $pr") refs/pull/$pr/merge" >> "$events"
  if [ $((RANDOM % 100)) -lt 30 ]; then echo "$(git_commit "pr $pr, reworded") refs/pull/$pr/merge" >> "$events"; fi
  echo "$(git_commit "merge pr $pr") refs/heads/main" >> "$events"
done

week() {  # $1 = reuse|no-reuse; prints card-seconds held by steps that ran, steps reused, runs
  local mode=$1 root="$WORK/root-$1" flag=""
  [ "$mode" = no-reuse ] && flag="--no-reuse"
  mkdir -p "$root"
  printf 'source:\n  repo: %s\nsandbox: off\n' "$REPO" > "$root/runner.yml"
  "$BIN" serve --root "$root" --listen 127.0.0.1:0 --devices 8 --state-dir "$root/state" --lock-dir "$root/locks" > "$root/serve.out" 2>&1 &
  SPID=$!
  for _ in $(seq 1 100); do grep -q "listening on" "$root/serve.out" && break; sleep 0.05; done
  local port
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$root/serve.out" | head -1)
  while read -r sha ref; do
    local rc=0
    "$BIN" submit --server "http://127.0.0.1:$port" --token-file "$root/state/token" --sha "$sha" --ref "$ref" --wait $flag \
      --poll-interval 0.1 > "$root/submit.out" 2>&1 || rc=$?
    [ "$rc" -le 1 ] || { cat "$root/submit.out" >&2; kill "$SPID"; exit 1; }
    echo "$rc" >> "$WORK/results-$mode"
  done < "$events"
  kill "$SPID"; wait "$SPID" 2>/dev/null || true
  python3 - "$root/state/runs" <<'PY'
import glob, json, sys
held = reused = runs = red = builds = 0
for f in glob.glob(sys.argv[1] + "/*/run.json"):
    r = json.load(open(f)); runs += 1; red += r.get("state") != "succeeded"
    for j in r["jobs"]:
        for s in j["steps"]:
            if j["id"] == "build" and s["state"] == "succeeded": builds += 1
            if s["state"] == "reused": reused += 1
            elif s["state"] == "succeeded": held += s.get("duration_seconds", 0) * len(s.get("cards", []) or [])
print(f"{held:.2f} {reused} {runs} {red} {builds}")
PY
}

read -r on_held on_reused on_runs on_red on_builds < <(week reuse)
read -r off_held off_reused off_runs off_red off_builds < <(week no-reuse)
same=no
cmp -s "$WORK/results-reuse" "$WORK/results-no-reuse" && same=yes
pushes=$(grep -c "refs/pull" "$events"); merges=$(grep -c "refs/heads/main" "$events")
python3 - "$on_held" "$off_held" "$on_reused" "$on_runs" "$on_red" "$off_red" "$pushes" "$merges" "$PRS" "$same" "$on_builds" "$off_builds" <<'PY'
import sys
on, off, reused, runs, red_on, red_off, pushes, merges, prs, same, builds_on, builds_off = sys.argv[1:]
on, off = float(on), float(off)
print(f"a week of {prs} pull requests: {pushes} pull-request runs and {merges} merges to main ({runs} runs each way)")
print(f"  card-seconds held by steps that ran: without reuse {off:.1f}, with reuse {on:.1f}: {100 * (1 - on / off):.0f}% fewer"
      f" (target >= 30%); {reused} steps reused")
print(f"  red runs: {red_on} with reuse, {red_off} without; every run's result the same either way: {same}")
print(f"  builds run: {builds_on} with reuse, {builds_off} without (a job of reused steps does not wait for its build)")
PY
