#!/usr/bin/env bash
# The README's second command: install, build, run every test through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build && ctest --output-on-failure -j"$(nproc)" --timeout 300
