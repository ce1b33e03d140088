#!/usr/bin/env python3
"""Makes a stand-in PTOAS release archive in one of the real layouts, for tests and the demo.

The real PTOAS cannot be downloaded here; these archives reproduce what matters to pto-runner: file layout,
which path works as the executable, and `ptoas --version` printing `ptoas X.Y`.

Layouts (see toolchain/ptoas.yml):
  v0.50  <root>/ptoas is a bash launcher (exports LD_LIBRARY_PATH=<root>/lib, execs bin/ptoas);
         bin/ptoas alone fails like a binary missing its shared library.
  v0.52  <root>/ptoas is a Python package directory; <root>/bin/ptoas works alone.
  v0.55  <root>/ptoas.sh is the launcher (selects the bundled Python); bin/ptoas fails without it.
  wheel  a wheel whose console script `ptoas` pip installs into <venv>/bin/ptoas; its tag follows the file
         name (ptoas-0.57-cp310-cp310-manylinux_2_34_x86_64.whl is tagged cp310-cp310-manylinux_2_34_x86_64).
Hostile variants (--evil) for the extraction hardening tests: dotdot, absolute, symlink-root,
hardlink-out, device, fifo, big.

Usage: make-fake-ptoas.py --layout v0.52 --version v0.52 --out FILE [--kind tar.gz|zip] [--evil NAME]
       [--size-mb N]
"""
import argparse
import io
import os
import stat
import tarfile
import time
import zipfile


def script(text):
    return ("#!/bin/bash\n" + text).encode()


def files_for(layout, number):
    """[(path, bytes, mode)] and [directories] of one layout."""
    version_line = f'echo "ptoas {number}"'
    if layout == "v0.50":
        return [
            ("ptoas", script('root=$(cd "$(dirname "$0")" && pwd)\nexport LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"\nexec "$root/bin/ptoas" "$@"\n'), 0o755),
            ("bin/ptoas", script('case ":$LD_LIBRARY_PATH:" in *"/lib:"*) ;; *) echo "ptoas: error while loading shared libraries: libptoas.so.0" >&2; exit 127;; esac\n' + version_line + "\n"), 0o755),
            ("lib/libptoas.so.0", b"\x7fELF fake shared object\n", 0o644),
        ], ["bin", "lib"]
    if layout == "v0.52":
        return [
            ("ptoas/__init__.py", b"# the PTOAS Python package: a directory named ptoas, not an executable\n", 0o644),
            ("bin/ptoas", script(version_line + "\n"), 0o755),
            ("lib/libptoas.so.0", b"\x7fELF fake shared object\n", 0o644),
        ], ["ptoas", "bin", "lib"]
    if layout == "v0.55":
        return [
            ("ptoas.sh", script('root=$(cd "$(dirname "$0")" && pwd)\nexport PTOAS_PYTHON="$root/python/bin/python3"\nexec "$root/bin/ptoas" "$@"\n'), 0o755),
            ("bin/ptoas", script('[ -n "$PTOAS_PYTHON" ] || { echo "ptoas: ModuleNotFoundError: No module named ptoas_core (wrong python)" >&2; exit 1; }\n' + version_line + "\n"), 0o755),
            ("python/bin/python3", script("exit 0\n"), 0o755),
        ], ["bin", "python", "python/bin"]
    raise SystemExit(f"unknown layout {layout}")


def write_wheel(out, number, tag="py3-none-any"):
    dist = f"ptoas-{number}.dist-info"
    entries = {
        "ptoas/__init__.py": b"",
        "ptoas/cli.py": f'def main():\n    print("ptoas {number}")\n'.encode(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: ptoas\nVersion: {number}\n".encode(),
        f"{dist}/WHEEL": f"Wheel-Version: 1.0\nGenerator: make-fake-ptoas\nRoot-Is-Purelib: true\nTag: {tag}\n".encode(),
        f"{dist}/entry_points.txt": b"[console_scripts]\nptoas = ptoas.cli:main\n",
    }
    import base64
    import hashlib
    record = []
    for name, data in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    entries[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)


def tar_add(t, name, data=None, mode=0o644, kind=tarfile.REGTYPE, linkname="", size=None):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = int(time.time())
    info.linkname = linkname
    if kind == tarfile.REGTYPE:
        info.size = len(data) if size is None else size
        t.addfile(info, io.BytesIO(data) if size is None else data)
    else:
        t.addfile(info)


class Zeros(io.RawIOBase):
    def __init__(self, n):
        self.left = n

    def readinto(self, b):
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n

    def readable(self):
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", default="v0.52", choices=["v0.50", "v0.52", "v0.55", "wheel"])
    ap.add_argument("--version", default="v0.52")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kind", default="tar.gz", choices=["tar.gz", "zip"])
    ap.add_argument("--evil", default="")
    ap.add_argument("--size-mb", type=int, default=0, help="pad with an incompressible-enough blob of this size")
    ap.add_argument("--wheel-tag", default="", help="wheel only: the Tag (default: from --out's file name)")
    a = ap.parse_args()
    number = a.version.lstrip("v")
    if a.layout == "wheel":
        tag = a.wheel_tag
        if not tag:
            parts = os.path.basename(a.out)[:-len(".whl")].split("-")
            tag = "-".join(parts[-3:]) if len(parts) >= 5 else "py3-none-any"
        write_wheel(a.out, number, tag)
        return
    files, dirs = files_for(a.layout, number)
    if a.kind == "zip":
        with zipfile.ZipFile(a.out, "w", zipfile.ZIP_DEFLATED) as z:
            for d in dirs:
                z.writestr(zipfile.ZipInfo(d + "/"), b"")
            for path, data, mode in files:
                info = zipfile.ZipInfo(path)
                info.external_attr = (stat.S_IFREG | mode) << 16
                z.writestr(info, data)
            if a.evil == "dotdot":
                z.writestr("../escaped", b"x")
        return
    with tarfile.open(a.out, "w:gz", compresslevel=1) as t:
        # Like `tar -czf ... -C dir .`: entries start with ./
        tar_add(t, ".", kind=tarfile.DIRTYPE, mode=0o755)
        for d in dirs:
            tar_add(t, "./" + d, kind=tarfile.DIRTYPE, mode=0o755)
        for path, data, mode in files:
            tar_add(t, "./" + path, data, mode)
        if a.size_mb:
            rnd = os.urandom(1 << 20)
            blob = rnd * a.size_mb  # repeats, so gzip shrinks it little at level 1 window sizes
            tar_add(t, "./lib/blob.bin", blob, 0o644)
        evil = a.evil
        if evil == "dotdot":
            tar_add(t, "./../escaped", b"outside\n")
        elif evil == "absolute":
            tar_add(t, "/etc/pto-runner-escaped", b"outside\n")
        elif evil == "symlink-root":
            tar_add(t, "./rootlink", kind=tarfile.SYMTYPE, linkname="/")
            tar_add(t, "./rootlink/tmp/pto-runner-escaped", b"through the link\n")
        elif evil == "symlink-out":
            tar_add(t, "./lib/outside", kind=tarfile.SYMTYPE, linkname="../../../../../etc/passwd")
        elif evil == "hardlink-out":
            tar_add(t, "./lib/passwd", kind=tarfile.LNKTYPE, linkname="/etc/passwd")
        elif evil == "device":
            info = tarfile.TarInfo("./dev-null")
            info.type = tarfile.CHRTYPE
            info.devmajor, info.devminor = 1, 3
            t.addfile(info)
        elif evil == "fifo":
            tar_add(t, "./pipe", kind=tarfile.FIFOTYPE)
        elif evil == "big":
            tar_add(t, "./lib/huge.bin", Zeros(64 << 20), 0o644, size=64 << 20)
        elif evil:
            raise SystemExit(f"unknown --evil {evil}")


if __name__ == "__main__":
    main()
