#!/usr/bin/env bash
# Builds demo/: the project's own jobs/, models/ and toolchain/ with a locally made PTOAS wheel in a mirror
# directory (scripts/make-local-pin.sh: there is no internet here), and a runner.yml for 8 simulated a2a3
# cards in groups of 2 and 2 a5 cards. The shipped toolchain/ keeps the real digests.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=${1:-demo}
rm -rf "$DEMO"
mkdir -p "$DEMO"
cp -r jobs models toolchain "$DEMO/"
PIN=$(scripts/make-local-pin.sh "$DEMO")
cat > "$DEMO/runner.yml" <<YML
# Demo host: 8 simulated a2a3 cards in HCCS pairs and 2 a5 cards, everything kept under demo/.
devices:
  ids: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
  groups: [[0, 1], [2, 3], [4, 5], [6, 7]]
  types: {a2a3: [0, 1, 2, 3, 4, 5, 6, 7], a5: [8, 9]}
  lock-dir: locks
# The simulated host's CPUs and memory, what steps' cpus:/memory: are granted from (ci/hosts/a2a3.yml's).
host: {cpus: 192, memory: 1024G}
state-dir: state
cache-dir: cache
toolchain-mirror: mirror
listen: 127.0.0.1:8787
token-file: token
YML
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DEMO/token"
chmod 600 "$DEMO/token"
echo "demo: $DEMO ($PIN)"
