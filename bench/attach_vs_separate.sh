#!/usr/bin/env bash
# One pto-runner run per workflow run (`submit --attach`) against one run per workflow job: two workflow jobs
# (a: 4 one-card steps of 10 min, b: a two-card step of 15 min), both needing a 20-minute build on one card, on
# a simulated daemon (8 cards; TIME_SCALE real seconds per simulated second, default 0.002). Prints the wall time
# until both clients exit and the card-time both used (simulated minutes), and attached / separate ratios.
# Usage: bench/attach_vs_separate.sh [BIN]   (default build/pto-runner)
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
source "$(dirname "$0")/daemon_lib.sh"
TIME_SCALE=${TIME_SCALE:-0.002}  # real seconds per simulated second
P=$WORK/p
mkdir -p "$P/jobs" "$P/toolchain"
cp "$(dirname "$0")/../toolchain/versions.env" "$P/toolchain/"
cat > "$P/jobs/build.yml" <<'Y'
name: build
steps:
  - {name: build, devices: 1, expected-minutes: 20, run: 'true build'}
Y
cat > "$P/jobs/a.yml" <<'Y'
name: a
needs: [build]
parallel: true
steps:
  - {name: a1, devices: 1, expected-minutes: 10, run: 'true a1'}
  - {name: a2, devices: 1, expected-minutes: 10, run: 'true a2'}
  - {name: a3, devices: 1, expected-minutes: 10, run: 'true a3'}
  - {name: a4, devices: 1, expected-minutes: 10, run: 'true a4'}
Y
cat > "$P/jobs/b.yml" <<'Y'
name: b
needs: [build]
steps:
  - {name: b1, devices: 2, expected-minutes: 15, run: 'true b1'}
Y
start_daemon "$P" "$TIME_SCALE"
export PTO_RUNNER_SERVER=http://127.0.0.1:$PORT PTO_RUNNER_TOKEN=$(cat "$P/state/token")
# Card-time (simulated minutes) of the runs a client printed, from their records.
card_minutes() {
  local total=0
  for id in "$@"; do
    total=$(curl -s "$PTO_RUNNER_SERVER/api/v1/runs/$id" | python3 -c '
import json,sys
r=json.load(sys.stdin); s=0.0
for j in r["jobs"]:
  for st in j["steps"]: s+=st["duration_seconds"]*len(st.get("cards") or [])
print(s)' | awk -v t="$total" -v sc="$TIME_SCALE" '{print t + $1/sc/60}')
  done
  echo "$total"
}
ids_of() { sed -n 's/.*\(submitted\|attached to\) run \([0-9a-z-]*\).*/\2/p' "$@" | sort -u; }
t0=$(date +%s.%N)
"$BIN" submit --job a --wait > "$WORK/sa.out" 2>&1 & A=$!
"$BIN" submit --job b --wait > "$WORK/sb.out" 2>&1 & B=$!
wait $A $B
t1=$(date +%s.%N)
sep_wall=$(echo "($t1 - $t0) / $TIME_SCALE / 60" | bc -l)
sep_card=$(card_minutes $(ids_of "$WORK/sa.out" "$WORK/sb.out"))
t0=$(date +%s.%N)
"$BIN" submit --attach bench/1/1 --job a > "$WORK/aa.out" 2>&1 & A=$!
"$BIN" submit --attach bench/1/1 --job b > "$WORK/ab.out" 2>&1 & B=$!
wait $A $B
t1=$(date +%s.%N)
att_wall=$(echo "($t1 - $t0) / $TIME_SCALE / 60" | bc -l)
att_ids=$(ids_of "$WORK/aa.out" "$WORK/ab.out")
att_card=$(card_minutes $att_ids)
printf 'separate runs: %d run(s), wall %.1f min, card-time %.1f card-min\n' "$(ids_of "$WORK/sa.out" "$WORK/sb.out" | wc -l)" "$sep_wall" "$sep_card"
printf 'attached     : %d run(s), wall %.1f min, card-time %.1f card-min\n' "$(echo "$att_ids" | wc -l)" "$att_wall" "$att_card"
printf 'ratio attached/separate: wall %.2fx, card-time %.2fx\n' "$(echo "$att_wall / $sep_wall" | bc -l)" "$(echo "$att_card / $sep_card" | bc -l)"
