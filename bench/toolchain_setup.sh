#!/usr/bin/env bash
# Cold `toolchain setup` of a ~200 MB PTOAS archive from a mirror directory (copy, sha256, hardened extract,
# locate, smoke check), side by side with `sha256sum` + `tar xzf` of the same file in the same script; then
# the warm setup (cache hit: the archive is re-verified, the install located and smoke-checked).
# Target: cold <= 1.2x the baseline. Usage: bench/toolchain_setup.sh [build/pto-runner] [size-mb]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
MB=${2:-200}
HERE=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/mirror/v0.52" "$WORK/toolchain" "$WORK/base"
ARCHIVE="$WORK/mirror/v0.52/ptoas-bin-x86_64.tar.gz"
python3 "$HERE/scripts/make-fake-ptoas.py" --layout v0.52 --version v0.52 --size-mb "$MB" --out "$ARCHIVE"
SHA=$(sha256sum "$ARCHIVE" | cut -d' ' -f1)
printf 'PTOAS_VERSION=v0.52\nPTOAS_SHA256_AARCH64=%s\nPTOAS_SHA256_X86_64=%s\n' "$SHA" "$SHA" > "$WORK/toolchain/versions.env"
printf 'artifact: ptoas-bin-{arch}.tar.gz\nurl: file:///nonexistent/{version}/{artifact}\nkind: tar.gz\nmax-size-mb: 4096\n' > "$WORK/toolchain/ptoas.yml"
cat "$ARCHIVE" > /dev/null  # same page-cache state for both
now() { date +%s.%N; }
t0=$(now); sha256sum "$ARCHIVE" > /dev/null; tar xzf "$ARCHIVE" -C "$WORK/base"; t1=$(now)
"$BIN" toolchain setup --root "$WORK" --arch x86_64 --cache-dir "$WORK/cache" --mirror "$WORK/mirror" > /dev/null 2>&1; t2=$(now)
"$BIN" toolchain setup --root "$WORK" --arch x86_64 --cache-dir "$WORK/cache" --mirror "$WORK/mirror" > /dev/null 2>&1; t3=$(now)
python3 - "$t0" "$t1" "$t2" "$t3" "$(stat -c %s "$ARCHIVE")" <<'PY'
import sys
t0, t1, t2, t3, size = map(float, sys.argv[1:])
base, cold, warm = t1 - t0, t2 - t1, t3 - t2
print(f"archive: {size / 2**20:.0f} MiB")
print(f"sha256sum + tar xzf (baseline): {base:.2f} s")
print(f"toolchain setup, cold:          {cold:.2f} s  = {cold / base:.2f}x baseline (also copies the file into the cache)")
print(f"toolchain setup, warm:          {warm:.2f} s  (re-verify + locate + smoke check)")
PY
