#!/usr/bin/env bash
# Configures and builds pto-runner into build/ (once; later calls rebuild incrementally). Arguments go to
# CMake's configure step: `scripts/build.sh -DPTO_RUNNER_TESTS=OFF` builds what the .deb holds and no tests
# (what `scripts/install-deps.sh --package` installs is then enough).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_GENERATOR:+-G "$CMAKE_GENERATOR"} "$@" >/dev/null
cmake --build build -j"$(nproc)"
