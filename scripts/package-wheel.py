#!/usr/bin/env python3
"""Writes the wheel m3idx-<version>-py3-none-manylinux_2_28_x86_64.whl from the archive's staged
tree: the m3idx package (python/m3idx) with lib/libm3idx.so inside it, the `m3idx` console
command (m3idx._cli), and the metadata. Written by hand: a wheel is a zip with four text files
(PEP 427, the core metadata spec, entry points), and the tag is ours to choose because the
package is Python over a C ABI (py3-none) whose ELF scripts/elf_policy.py holds to
manylinux_2_28. Entries go in a fixed order, dated SOURCE_DATE_EPOCH (else 1980), so that two builds of
one tree give the same bytes. Usage: package-wheel.py TREE DIST VERSION"""
import base64
import hashlib
import os
import sys
import time
import zipfile

TAG = "py3-none-manylinux_2_28_x86_64"


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel_files(tree, version):
    """(path in the wheel, bytes, executable) of every file, dist-info last but RECORD."""
    info = f"m3idx-{version}.dist-info"
    files = []
    pkg = os.path.join(tree, "python", "m3idx")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            files.append((f"m3idx/{name}", open(os.path.join(pkg, name), "rb").read(), False))
    files.append(("m3idx/libm3idx.so", open(os.path.join(tree, "lib", "libm3idx.so"), "rb").read(), True))
    licenses = os.path.join(tree, "share", "doc", "m3idx", "licenses")
    license_names = sorted(os.listdir(licenses))
    for name in license_names:
        files.append((f"{info}/licenses/{name}", open(os.path.join(licenses, name), "rb").read(), False))
    readme = open(os.path.join(tree, "share", "doc", "m3idx", "README.md"), "rb").read()
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        "Name: m3idx",
        f"Version: {version}",
        "Summary: JIT kernels for the MiniMax-M3 lightning indexer over a paged NVFP4 index-K cache",
        "Requires-Python: >=3.9",
        "Requires-Dist: numpy",
        "Provides-Extra: torch",
        'Requires-Dist: torch; extra == "torch"',
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Programming Language :: Python :: 3",
        "Description-Content-Type: text/markdown",
        *[f"License-File: licenses/{name}" for name in license_names],
        "", ""]).encode() + readme
    files.append((f"{info}/METADATA", metadata, False))
    files.append((f"{info}/WHEEL", "\n".join([
        "Wheel-Version: 1.0", "Generator: m3idx scripts/package-wheel.py", "Root-Is-Purelib: false",
        f"Tag: {TAG}", ""]).encode(), False))
    files.append((f"{info}/entry_points.txt", b"[console_scripts]\nm3idx = m3idx._cli:main\n", False))
    return info, files


def main(tree, dist, version):
    info, files = wheel_files(tree, version)
    stamp = time.gmtime(max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800))[:6]
    path = os.path.join(dist, f"m3idx-{version}-{TAG}.whl")
    record = []
    with zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_DEFLATED, compresslevel=9) as whl:
        for name, data, executable in files:
            entry = zipfile.ZipInfo(name, stamp)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = (0o100755 if executable else 0o100644) << 16
            whl.writestr(entry, data)
            record.append(f"{name},{record_hash(data)},{len(data)}")
        record.append(f"{info}/RECORD,,")
        entry = zipfile.ZipInfo(f"{info}/RECORD", stamp)
        entry.compress_type = zipfile.ZIP_DEFLATED
        entry.external_attr = 0o100644 << 16
        whl.writestr(entry, "\n".join(record) + "\n")
    os.replace(path + ".tmp", path)
    print(path)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("Usage: ")[1])
    main(*sys.argv[1:])
