#!/usr/bin/env bash
# Run on the H200 (device tool, with .gpu carried; make it with bench/gpu-prepare.sh): builds the
# LLVM-free CUDA checker with the machine's g++ and checks every case in .gpu/cases on the GPU
# against the scalar reference. Writes the log to $OUT/gpu-check.log when OUT is set.
set -euo pipefail
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
mkdir -p /tmp/m3idx-obj
ls core/*.cpp casefile/*.cpp reference/*.cpp dsl/*.cpp kernels_src/*.cpp runtime/cuda/*.cpp \
  tools/m3idx-cuda-check.cpp |
  xargs -P "$(nproc)" -I{} sh -c 'g++ -std=c++20 -O2 -DFMT_HEADER_ONLY -ffp-contract=off -I. \
    -I.gpu/include -c {} -o /tmp/m3idx-obj/$(echo {} | tr / _).o'
g++ /tmp/m3idx-obj/*.o -ldl -o /tmp/m3idx-cuda-check
/tmp/m3idx-cuda-check .gpu/ptx .gpu/cases/* 2>&1 | tee "$OUT/gpu-check.log"
# Timing baseline (issue 5's decode shapes that fit the run): generated on the device.
for shape in "256 32768 1" "256 131072 1" "64 131072 4"; do
  # shellcheck disable=SC2086
  /tmp/m3idx-cuda-check .gpu/ptx --bench $shape 2>&1 | tee -a "$OUT/gpu-bench.log"
done
