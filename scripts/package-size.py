#!/usr/bin/env python3
"""What each large piece adds to libm3idx.so, from lld's link map (-Wl,-Map): the sizes of the
input sections kept, grouped by the archive they came from. Usage: package-size.py MAP"""
import re
import sys
from collections import defaultdict

GROUPS = [  # (label, pattern on the input file), first match wins
    ("LLVM AMDGPU back end", r"libLLVMAMDGPU"),
    ("LLVM NVPTX back end", r"libLLVMNVPTX"),
    ("LLVM X86 back end", r"libLLVMX86"),
    ("lld (ELF linker)", r"liblld"),
    ("MLIR", r"libMLIR"),
    ("LLVM common (IR, passes, codegen, MC, ORC, support)", r"libLLVM"),
    ("m3idx", r"libm3idx_|CMakeFiles/m3idx"),
    ("linker-made (unwind tables, relocations, symbol tables)", r"^<internal>$"),
]


def main(path):
    sizes = defaultdict(int)
    line_re = re.compile(r"^\s*[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s{9,}(\S.*?):\(")
    with open(path, errors="replace") as f:
        for line in f:
            m = line_re.match(line)
            if not m:
                continue
            size, source = int(m.group(1), 16), m.group(2)
            label = next((g for g, p in GROUPS if re.search(p, source)), "C++ runtime and other")
            sizes[label] += size
    total = sum(sizes.values())
    print("libm3idx.so before stripping, by origin (kept input sections):")
    for label, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
        print(f"  {size / 2**20:7.1f} MiB  {100 * size / max(total, 1):5.1f}%  {label}")
    print(f"  {total / 2**20:7.1f} MiB  total")


if __name__ == "__main__":
    main(sys.argv[1])
