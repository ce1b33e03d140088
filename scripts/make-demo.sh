#!/usr/bin/env bash
# Builds demo/: the project's own jobs/, models/ and toolchain/ with a locally made PTOAS wheel in a mirror
# directory (there is no internet here), its digest written into demo/toolchain/versions.env, and a
# runner.yml for 8 simulated cards in groups of 2. The shipped pin is a CPython 3.10 wheel; this machine's
# python3 may be another version, so the demo's wheel is tagged for it and its ptoas.yml names python3.
# The shipped toolchain/ keeps the real digests.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=${1:-demo}
ARCH=$(uname -m); [[ $ARCH == arm64 ]] && ARCH=aarch64
VERSION=$(grep -E '^PTOAS_VERSION=' toolchain/versions.env | cut -d= -f2)
TAG=$(python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
rm -rf "$DEMO"
mkdir -p "$DEMO/mirror/$VERSION"
cp -r jobs models toolchain "$DEMO/"
ARTIFACT="ptoas-${VERSION#v}-$TAG-$TAG-manylinux_2_34_$ARCH.whl"
python3 scripts/make-fake-ptoas.py --layout wheel --version "$VERSION" --out "$DEMO/mirror/$VERSION/$ARTIFACT"
sed -i "s/^artifact: .*/artifact: ptoas-{version_number}-$TAG-$TAG-manylinux_2_34_{arch}.whl/; s/^python: .*/python: python3/" \
  "$DEMO/toolchain/ptoas.yml"
SHA=$(sha256sum "$DEMO/mirror/$VERSION/$ARTIFACT" | cut -d' ' -f1)
KEY=PTOAS_SHA256_$(echo "$ARCH" | tr a-z A-Z)
sed -i "s/^$KEY=.*/$KEY=$SHA/" "$DEMO/toolchain/versions.env"
cat > "$DEMO/runner.yml" <<YML
# Demo host: 8 simulated NPU cards in HCCS pairs, everything kept under demo/.
devices:
  ids: [0, 1, 2, 3, 4, 5, 6, 7]
  groups: [[0, 1], [2, 3], [4, 5], [6, 7]]
  lock-dir: locks
state-dir: state
cache-dir: cache
toolchain-mirror: mirror
listen: 127.0.0.1:8787
token-file: token
YML
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DEMO/token"
chmod 600 "$DEMO/token"
echo "demo: $DEMO (PTOAS $VERSION for $ARCH from a local wheel tagged $TAG, sha256 $SHA)"
