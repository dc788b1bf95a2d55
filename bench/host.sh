#!/usr/bin/env bash
# Host benchmarks of issue 3, all in one run: the host JIT vs the scalar reference on a realistic
# decode step (16 requests x 4 rows x 32K tokens) at 1 and 4 heads, and a prefill step; cold JIT
# compile time of every kernel. Usage: bench/host.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
M3IDX="$BUILD/bin/m3idx"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "# $(date -u +%Y-%m-%d) $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$M3IDX" gen --out "$work/d1" --seed 1 --heads 1 --decodes 16 --context 32768 --prefills 0 >/dev/null
"$M3IDX" gen --out "$work/d4" --seed 2 --heads 4 --decodes 16 --context 32768 --prefills 0 >/dev/null
"$M3IDX" gen --out "$work/p4" --seed 3 --heads 4 --decodes 0 --prefills 4 --prefill-len 512 \
  --prefill-context 8192 >/dev/null
for c in d1 d4; do
  "$M3IDX" bench "$work/$c" --backend host --repeat 20
  "$M3IDX" bench "$work/$c" --backend ref --repeat 3 --warmup 0
done
"$M3IDX" bench "$work/p4" --backend host --repeat 5
"$M3IDX" bench "$work/p4" --backend ref --repeat 1 --warmup 0
