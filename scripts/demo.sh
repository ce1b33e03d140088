#!/usr/bin/env bash
# The README's first command: install, build, and run the main job on an embedded default — the project's own
# jobs/ and models/ on 8 simulated NPU cards, with the pinned PTOAS set up for real from a locally made archive.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/make-demo.sh demo
exec build/pto-runner run --root demo --simulate --time-scale "${TIME_SCALE:-0.005}"
