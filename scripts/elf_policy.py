#!/usr/bin/env python3
"""Checks every ELF under the given files or folders against m3idx's shipping policy and exits 1
naming each library or symbol that breaks it. The policy is manylinux_2_28's (PEP 600, as
auditwheel's policy file states it for x86_64), made stricter where m3idx links its runtimes in:

  needed libraries   only glibc's (libc, libm, libdl, libpthread, librt, libutil, libnsl,
                     libresolv, libanl and the loader ld-linux-x86-64.so.2) and libm3idx.so itself
                     (bin/m3idx's). manylinux_2_28 also allows libstdc++, libgcc_s, libatomic,
                     libz, libexpat and the X11/GL/GLib libraries; m3idx links the first four
                     statically and needs none of the rest.
  symbol versions    GLIBC_2.x up to GLIBC_2.28 (what RHEL 8's glibc defines), never
                     GLIBC_PRIVATE. manylinux_2_28 allows GLIBCXX_3.4.24, CXXABI_1.3.11 and
                     GCC_7.0.0 at most; m3idx needs none of them (libstdc++ and libgcc are in).

It reads the needed libraries (DT_NEEDED) and version needs (.gnu.version_r) with binutils'
readelf. Usage: elf_policy.py PATH..."""
import os
import re
import subprocess
import sys

GLIBC_LIBRARIES = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                   "libutil.so.1", "libnsl.so.1", "libresolv.so.2", "libanl.so.1",
                   "ld-linux-x86-64.so.2"}
OWN_LIBRARIES = {"libm3idx.so"}
GLIBC_MAX = (2, 28)


def elf_files(paths):
    for path in paths:
        if os.path.isdir(path):
            for folder, _, names in os.walk(path):
                yield from elf_files(os.path.join(folder, n) for n in sorted(names))
        elif os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    yield path


def readelf(args, path):
    return subprocess.run(["readelf", "-W", *args, path], check=True, capture_output=True, text=True).stdout


def version_allowed(version):
    m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", version)
    return bool(m) and (int(m.group(1)), int(m.group(2))) <= GLIBC_MAX


def violations(path):
    """Each broken rule of one ELF, as a line naming the library or the symbol."""
    found = []
    for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf(["-d"], path)):
        if lib not in GLIBC_LIBRARIES | OWN_LIBRARIES:
            found.append(f"needs library {lib} (only glibc's libraries may be needed)")
    needed_versions = set()  # the versions needed of other files than m3idx's own
    library = None
    for line in readelf(["-V"], path).splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            library = m.group(1)
        m = re.search(r"Name: (\S+)\s+Flags:", line)
        if m and library not in OWN_LIBRARIES:
            needed_versions.add(m.group(1))
    bad_versions = {v for v in needed_versions if not version_allowed(v)}
    if bad_versions:
        symbols = {}
        for line in readelf(["--dyn-syms"], path).splitlines():
            m = re.search(r"\sUND\s+([^@\s]+)@(\S+)", line)
            if m and m.group(2) in bad_versions:
                symbols.setdefault(m.group(2), []).append(m.group(1))
        for version in sorted(bad_versions):
            names = sorted(symbols.get(version, ["(no symbol named; the version is needed)"]))
            found.append(f"needs {version} (above GLIBC_2.28 or not glibc's): " + ", ".join(names))
    return found


def main(paths):
    files = list(elf_files(paths))
    if not files:
        sys.exit(f"elf_policy: no ELF file under {' '.join(paths)}")
    failed = False
    for path in files:
        for problem in violations(path):
            print(f"elf_policy: {path}: {problem}", file=sys.stderr)
            failed = True
    if failed:
        sys.exit(1)
    print(f"elf_policy: {len(files)} ELF files within manylinux_2_28 (glibc <= 2.28, no C++ runtime needed)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__.split("Usage: ")[1])
    main(sys.argv[1:])
