#!/usr/bin/env bash
# Configures and builds pto-runner into build/ (once; later calls rebuild incrementally).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_GENERATOR:+-G "$CMAKE_GENERATOR"} >/dev/null
cmake --build build -j"$(nproc)"
