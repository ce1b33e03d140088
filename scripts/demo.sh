#!/usr/bin/env bash
# The README's first command: install, build, then run the main job on an embedded default — the daemon
# serving the project's own jobs/ and models/ on 8 simulated NPU cards (in pairs), with the pinned PTOAS set up
# for real from a locally made archive. It submits one run, shows its progress to the end, prints the status
# URL, and keeps serving until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/make-demo.sh demo
LISTEN=${LISTEN:-127.0.0.1:8787}
build/pto-runner serve --root demo --simulate --time-scale "${TIME_SCALE:-0.005}" --listen "$LISTEN" &
SERVE=$!
trap 'kill -INT $SERVE 2>/dev/null; wait $SERVE 2>/dev/null' EXIT INT TERM  # SIGINT: cancel (SIGTERM would drain)
for _ in $(seq 1 50); do curl -fs "http://$LISTEN/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
echo "status while it runs: http://$LISTEN/api/v1/status  (or: build/pto-runner status --server http://$LISTEN)"
rc=0
build/pto-runner submit --server "http://$LISTEN" --token-file demo/token --wait --poll-interval 0.5 || rc=$?
echo
build/pto-runner status --server "http://$LISTEN"
echo
echo "run finished with exit code $rc; the daemon keeps serving http://$LISTEN/api/v1/status, /api/v1/runs, /metrics"
echo "submit more:  build/pto-runner submit --server http://$LISTEN --token-file demo/token --wait"
echo "Ctrl-C stops it."
wait $SERVE
