#!/usr/bin/env bash
# Run on the H200 (device tool, with .gpu carried; make it with bench/gpu-prepare.sh). Stages, each
# fitting one device call: `check` builds the LLVM-free CUDA checker with the machine's g++ and
# checks every case in .gpu/cases against the scalar reference, through the backend and through the
# Indexer API on device buffers; `indexer` times Indexer::forward next to the backend; `bench` times generated decode steps
# next to the copy bandwidth (`bench-checked` also checks each against the reference on the CPU,
# about 7 minutes); `prefill` times 4 prompts of 32K tokens (H=1, 4) next to the fp8 and f16
# tensor-core peaks (torch._scaled_mm, torch.matmul), and 64 prompts of 2K; `torch` runs PyTorch
# eager and torch.compile implementations of SPEC on the decode shapes (checked on the four golden
# cases), `torch-prefill` on the prefill ones; `cp` checks and times one decode-CP rank's share of
# 256-request steps;
# `sass` disassembles the score cubins; `ceiling` times plain reads in the decode score's page
# pattern next to the copy (bench/page_read_ceiling.cu, nvcc); `wgmma` times the decode loop with
# Hopper's fp8 wgmma next to the same loop on mma.sync (bench/wgmma_probe.cu, nvcc, sm_90a). Logs
# go to $OUT when it is set.
# `table` runs bench, torch, prefill and torch-prefill and prints issue 5's table from their logs
# (bench/table.py).
# Usage: bench/gpu.sh [check|indexer|bench|bench-checked|prefill|torch|torch-prefill|table|cp|sass|ceiling|wgmma]...
set -euo pipefail
OUT=${OUT:-/tmp}
stages=("$@")
[[ ${#stages[@]} -eq 0 ]] && stages=(check bench)
# issue 5's two prefill steps, and as many rows in short prompts (fixed costs: tiles, top-k per row)
prefill_shapes=("4 32768 1" "4 32768 4" "64 2048 1")
build() {
  [[ -x /tmp/m3idx-cuda-check ]] && return
  mkdir -p /tmp/m3idx-obj
  ls core/*.cpp casefile/*.cpp reference/*.cpp dsl/*.cpp kernels_src/*.cpp runtime/cuda/*.cpp runtime/gpu/*.cpp \
    runtime/api/{BatchMetadata,DeviceCaseRun,GpuIndexerEngine,Indexer,TensorView}.cpp tools/m3idx-cuda-check.cpp |
    xargs -P "$(nproc)" -I{} sh -c 'g++ -std=c++20 -O2 -DFMT_HEADER_ONLY -ffp-contract=off -I. \
      -Iinclude -I.gpu/include -c {} -o /tmp/m3idx-obj/$(echo {} | tr / _).o'
  g++ /tmp/m3idx-obj/*.o -ldl -o /tmp/m3idx-cuda-check
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
for stage in "${stages[@]}"; do
  case $stage in
    check)
      build
      /tmp/m3idx-cuda-check .gpu/ptx .gpu/cases/* 2>&1 | tee "$OUT/gpu-check.log"
      # the same cases through the Indexer API on device buffers
      /tmp/m3idx-cuda-check .gpu/ptx --indexer .gpu/cases/* 2>&1 | tee -a "$OUT/gpu-check.log" ;;
    indexer) # Indexer::forward on device buffers vs the backend's launches alone, same run
      build
      for shape in "256 32768 1" "256 131072 1" "64 131072 4" "8 1048576 1"; do
        # shellcheck disable=SC2086
        /tmp/m3idx-cuda-check .gpu/ptx --indexer-bench $shape 2>&1 | tee -a "$OUT/gpu-indexer.log"
      done ;;
    bench|bench-checked)
      build
      flag=$([[ $stage == bench-checked ]] && echo --check || true)
      for shape in "256 32768 1" "256 131072 1" "64 131072 4" "8 1048576 1"; do
        # shellcheck disable=SC2086
        /tmp/m3idx-cuda-check .gpu/ptx --bench $shape $flag 2>&1 | tee -a "$OUT/gpu-bench.log"
      done ;;
    prefill)
      build
      for shape in "${prefill_shapes[@]}"; do
        # shellcheck disable=SC2086
        /tmp/m3idx-cuda-check .gpu/ptx --bench-prefill $shape 2>&1 | tee -a "$OUT/gpu-prefill.log"
      done
      python3 bench/torch_reference.py --fp8-peak --f16-peak 2>&1 | tee -a "$OUT/gpu-prefill.log" ;;
    torch-prefill) # PyTorch on the prefill steps (seconds each in eager)
      python3 bench/torch_reference.py --bench-prefill "${prefill_shapes[@]}" 2>&1 |
        tee -a "$OUT/gpu-prefill.log" ;;
    torch)
      python3 bench/torch_reference.py --check .gpu/cases/decode_exact .gpu/cases/decode_edge_nan_scales \
        .gpu/cases/prefill_exact .gpu/cases/mixed_realistic \
        --bench "256 32768 1" "256 131072 1" "64 131072 4" "8 1048576 1" \
        2>&1 | tee "$OUT/torch-bench.log" ;;
    table) # issue 5's whole table from one call: the four stages' logs joined, targets marked
      OUT="$OUT" bash "$0" bench torch prefill torch-prefill >/dev/null 2>&1 || true
      python3 bench/table.py "$OUT" 2>&1 | tee "$OUT/table.md" ;;
    cp) # one decode-CP rank's share (4 ranks x 1 head) on this one GPU: checked, then timed
      build
      for tokens in 32768 131072 1048576; do
        /tmp/m3idx-cuda-check .gpu/ptx --bench-cp 256 $tokens 1 4 2>&1 | tee -a "$OUT/gpu-cp.log"
      done ;;
    sass) # the machine code ptxas made of the score kernels, to count a loop's instructions
      dump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
      for f in .gpu/ptx/score_*.cubin; do
        "$dump" -sass "$f" > "$OUT/$(basename "$f" .cubin | tr '=,' '__').sass"
      done ;;
    ceiling) # what plain loads in score_decode's pattern reach: the bound for its 256 x 128K step
      nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
      "$nvcc" -O3 -std=c++17 -arch=sm_90 bench/page_read_ceiling.cu -o /tmp/page-read-ceiling
      for shape in "256 131072" "256 32768" "8 1048576"; do
        # shellcheck disable=SC2086
        /tmp/page-read-ceiling $shape 2>&1 | tee -a "$OUT/gpu-ceiling.log"
      done ;;
    wgmma) # the decode loop with wgmma e4m3 next to ours (mma.sync f16), checked against each other
      nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
      "$nvcc" -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a bench/wgmma_probe.cu -o /tmp/wgmma-probe
      for shape in "256 131072 8" "256 131072 32" "256 32768 8"; do
        # shellcheck disable=SC2086
        /tmp/wgmma-probe $shape 2>&1 | tee -a "$OUT/gpu-wgmma.log"
      done ;;
    *) echo "unknown stage $stage (check, indexer, table, bench, bench-checked, prefill, torch, torch-prefill, cp, sass, ceiling, wgmma)" >&2; exit 2 ;;
  esac
done
