#!/usr/bin/env bash
# The CLI on a CUDA GPU (the H200, from the archive): every golden case and freshly generated ones
# (decode_query_len 1 and 4, 1/2/4 heads, NaN scales, mixed) through `m3idx run --backend cuda`,
# through the Indexer API on device buffers (`--indexer`, block table on the host and on the
# device), each checked by `m3idx check`; generated steps timed and checked by `m3idx bench`
# (--check, --indexer, --cp-share). Exits 77 (skipped) with the reason where no CUDA driver loads.
# Usage: gpu_cli.sh M3IDX DATA_DIR
set -uo pipefail
M3IDX=$1
DATA=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export M3IDX_CACHE_DIR=${M3IDX_CACHE_DIR:-$work/cache}
failures=0

if ! probe=$("$M3IDX" run "$DATA/golden/decode_exact" --backend cuda --out "$work/probe" 2>&1); then
  if grep -qE "cannot load the driver library|cuInit failed" <<<"$probe"; then
    echo "skipped: no usable CUDA driver here ($probe)"
    exit 77
  fi
fi

gen() { "$M3IDX" gen --out "$work/cases/$1" "${@:2}" >/dev/null || { echo "FAIL gen $1"; exit 1; }; }
gen mixed_nan_h2 --seed 11 --heads 2 --decodes 5 --prefills 2 --context 0:4000 --nan-scales 0.02 --init 2 --local 0
gen decode_q1_h1 --seed 12 --mode exact --heads 1 --decodes 6 --decode-query-len 1 --context 0:900 --prefills 1
gen decode_h4 --seed 13 --mode exact --heads 4 --decodes 8 --context 0:6000 --prefills 0 --init 1 --local 1
gen prefill_h4 --seed 14 --heads 4 --decodes 0 --prefills 3 --prefill-len 1:300 --prefill-context 1:3000
for c in "$DATA"/golden/*/ "$work"/cases/*/; do
  name=$(basename "$c")
  for mode in backend indexer indexer-device-tables; do
    case $mode in
      backend) args=() ;;
      indexer) args=(--indexer) ;;
      indexer-device-tables) args=(--indexer --device-tables) ;;
    esac
    out=$work/out/$name-$mode
    if "$M3IDX" run "$c" --backend cuda --out "$out" "${args[@]}" >/dev/null && "$M3IDX" check "$c" "$out" >/dev/null
    then echo "ok   $name ($mode)"
    else echo "FAIL $name ($mode)"; failures=$((failures + 1))
    fi
  done
done

bench() { # NAME ARGS...: one bench that must exit 0
  if "$M3IDX" bench "${@:2}" --backend cuda >"$work/$1.log" 2>&1; then
    echo "ok   bench $1: $(grep -E 'top-k|median|Indexer::forward|CP shares' "$work/$1.log" | head -2 | tr '\n' ' ')"
  else
    echo "FAIL bench $1: $(tail -2 "$work/$1.log")"; failures=$((failures + 1))
  fi
}
bench decode --decode 4:20000:2 --repeat 5 --check
bench prefill --prefill 2:1500:1 --repeat 5 --check
bench indexer --decode 8:8192:1 --repeat 5 --indexer
bench cp-share --decode 8:8192:1 --repeat 5 --cp-share 4

[[ $failures -eq 0 ]] && echo "gpu_cli: ok" || { echo "gpu_cli: $failures failures"; exit 1; }
