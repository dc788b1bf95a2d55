#!/usr/bin/env bash
# scripts/elf_policy.py on ELFs built here: one within manylinux_2_28 passes; each kind of breach
# (a symbol above GLIBC_2.28, a C++ runtime version, a library outside glibc) fails, naming the
# symbol or the library. Usage: elf_policy.sh ROOT
set -euo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
policy() { python3 "$root/scripts/elf_policy.py" "$@"; }
fails_naming() { # fails_naming TEXT PATH: the check fails and its message names TEXT
  local out
  if out=$(policy "$2" 2>&1); then echo "FAIL: $2 passed; expected a breach naming $1"; exit 1; fi
  grep -qF -- "$1" <<<"$out" || { echo "FAIL: the message does not name $1: $out"; exit 1; }
}

printf '#include <stdio.h>\nvoid hello(void) { puts("hello"); }\n' >"$work/old.c"
cc -shared -fPIC -o "$work/libold.so" "$work/old.c"
policy "$work/libold.so" >/dev/null || { echo "FAIL: puts@GLIBC_2.2.5 only, refused"; exit 1; }

printf '#include <stdlib.h>\nunsigned r(void) { return arc4random(); }\n' >"$work/new.c"
cc -shared -fPIC -o "$work/libnew.so" "$work/new.c"
fails_naming "GLIBC_2.36" "$work/libnew.so"
fails_naming "arc4random" "$work/libnew.so"

printf '#include <string>\nstd::string s(const char* c) { return std::string(c) + "!"; }\n' >"$work/cxx.cpp"
c++ -shared -fPIC -o "$work/libcxx.so" "$work/cxx.cpp"
fails_naming "libstdc++.so.6" "$work/libcxx.so"
fails_naming "GLIBCXX_3.4" "$work/libcxx.so"

# A folder: every ELF in it is read, text files are not ELFs.
mkdir "$work/tree" && cp "$work/libold.so" "$work/libnew.so" "$work/tree/" && echo text >"$work/tree/README"
fails_naming "libnew.so" "$work/tree"
mkdir "$work/none" && echo text >"$work/none/README"
fails_naming "no ELF file" "$work/none"
echo "elf_policy: passes a glibc-2.2.5 library; names arc4random@GLIBC_2.36, libstdc++ and GLIBCXX"
