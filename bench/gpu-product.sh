#!/usr/bin/env bash
# On the H200 (device tool), the product as a user deploys it: the archive of scripts/package
# unpacked, nothing else of ours. Carry `carry` (carry/dist/*.tar.xz, and carry/bundle: an AOT
# bundle made here by the archive's own `m3idx compile --target sm_90`) and `.gpu` (cases from
# bench/gpu-prepare.sh). Logs go to $OUT.
#   check: every golden case and .gpu case through `m3idx run --backend cuda` + `m3idx check`,
#          first with an empty kernel cache (in-process DSL -> PTX, the driver's load), then warm
#   aot:   the same cases with M3IDX_RUN_ONLY=1 and only carry/bundle: zero compiles
#   bench: `m3idx bench --backend cuda` on the larger cases (events, L2 flushed, median of 25)
# Usage: bench/gpu-product.sh [check|aot|bench]...
set -euo pipefail
OUT=${OUT:-/tmp}
stages=("$@")
[[ ${#stages[@]} -eq 0 ]] && stages=(check aot bench)
root=/tmp/m3idx-archive
if [[ ! -x $root/bin/m3idx ]]; then
  mkdir -p "$root"
  tar -C "$root" --strip-components=1 -xJf carry/dist/m3idx-*-linux-x86_64.tar.xz
fi
m3idx=$root/bin/m3idx
cases=(tests/data/golden/*/ .gpu/cases/*/)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
ldd "$root/lib/libm3idx.so" | tee "$OUT/product-ldd.log"
run_all() { # $1: label; the rest: environment for each run
  local label=$1 failed=0
  shift
  for c in "${cases[@]}"; do
    local name out
    name=$(basename "$c")
    out=/tmp/product-out/$label/$name
    if env "$@" "$m3idx" run "$c" --backend cuda --out "$out" && "$m3idx" check "$c" "$out"; then :; else
      echo "FAILED: $label $name"
      failed=$((failed + 1))
    fi
  done
  echo "$label: ${#cases[@]} cases, $failed failed"
}
for stage in "${stages[@]}"; do
  case $stage in
    check)
      rm -rf /tmp/product-cache
      run_all cold M3IDX_CACHE_DIR=/tmp/product-cache 2>&1 | tee "$OUT/product-check.log"
      run_all warm M3IDX_CACHE_DIR=/tmp/product-cache 2>&1 | tee -a "$OUT/product-check.log" ;;
    aot)
      rm -rf /tmp/product-empty-cache
      run_all aot M3IDX_CACHE_DIR=/tmp/product-empty-cache M3IDX_RUN_ONLY=1 M3IDX_AOT_PATH="$PWD/carry/bundle" \
        2>&1 | tee "$OUT/product-aot.log" ;;
    bench)
      for c in .gpu/cases/decode_128k_h1 .gpu/cases/mixed_nan_h2 .gpu/cases/prefill_exact_h1; do
        M3IDX_CACHE_DIR=/tmp/product-cache "$m3idx" bench "$c" --backend cuda --repeat 25
      done 2>&1 | tee "$OUT/product-bench.log" ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
