#!/usr/bin/env bash
# Points ROOT/toolchain at a locally made PTOAS release (there is no internet here): a fake wheel of the
# pinned version in ROOT/mirror/<version>/, tagged for this machine's python3 (the shipped pin is a CPython
# 3.10 wheel and python3 here may be another version), ROOT/toolchain/ptoas.yml naming it and python3, and
# its digest in ROOT/toolchain/versions.env. Used by the demo and by the tests of the shipped definitions.
# Usage: make-local-pin.sh ROOT
set -euo pipefail
ROOT=${1:?usage: make-local-pin.sh ROOT}
HERE=$(cd "$(dirname "$0")" && pwd)
ARCH=$(uname -m); [[ $ARCH == arm64 ]] && ARCH=aarch64
VERSION=$(grep -E '^PTOAS_VERSION=' "$ROOT/toolchain/versions.env" | cut -d= -f2)
TAG=$(python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
ARTIFACT="ptoas-${VERSION#v}-$TAG-$TAG-manylinux_2_34_$ARCH.whl"
mkdir -p "$ROOT/mirror/$VERSION"
python3 "$HERE/make-fake-ptoas.py" --layout wheel --version "$VERSION" --out "$ROOT/mirror/$VERSION/$ARTIFACT"
sed -i "s/^artifact: .*/artifact: ptoas-{version_number}-$TAG-$TAG-manylinux_2_34_{arch}.whl/; s/^python: .*/python: python3/" \
  "$ROOT/toolchain/ptoas.yml"
SHA=$(sha256sum "$ROOT/mirror/$VERSION/$ARTIFACT" | cut -d' ' -f1)
KEY=PTOAS_SHA256_$(echo "$ARCH" | tr a-z A-Z)
sed -i "s/^$KEY=.*/$KEY=$SHA/" "$ROOT/toolchain/versions.env"
echo "PTOAS $VERSION for $ARCH from a local wheel tagged $TAG, sha256 $SHA"
