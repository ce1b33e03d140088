#!/usr/bin/env bash
# Two builds side by side on one machine, alternating (A, B, A, B) so drift and noise fall on both: the
# dispatch overhead, the card hand-over latency and the status endpoint under load, each benchmark's own
# baseline ratio printed per run. For a refactor's "before and after": no regression beyond noise.
# Usage: bench/compare_builds.sh OLD_BIN NEW_BIN [rounds=2] [dispatch steps=1000]
set -euo pipefail
OLD=$(realpath "$1")
NEW=$(realpath "$2")
ROUNDS=${3:-2}
STEPS=${4:-1000}
here=$(dirname "$0")
for round in $(seq 1 "$ROUNDS"); do
  for which in old new; do
    bin=$OLD; [ "$which" = new ] && bin=$NEW
    echo "=== round $round: $which ($bin)"
    "$here/dispatch_overhead.sh" "$bin" "$STEPS" 1 | sed 's/^/  /'
    "$here/release_latency.sh" "$bin" 200 | sed 's/^/  /'
    "$here/status_load.sh" "$bin" | sed 's/^/  /'
  done
done
