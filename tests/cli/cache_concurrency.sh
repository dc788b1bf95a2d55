#!/usr/bin/env bash
# 8 processes ask for the same new kernels at once: the per-key lock makes them compile once in
# total, and all 8 give the same, correct top-k. Then the cache CLI sees exactly those entries.
set -euo pipefail
M3IDX=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export M3IDX_CACHE_DIR="$work/cache"
"$M3IDX" gen --out "$work/case" --seed 3 --heads 1 --decodes 3 --prefills 0 --context 200:900 >/dev/null
"$M3IDX" run "$work/case" --backend ref --out "$work/ref" >/dev/null
pids=()
for i in $(seq 8); do
  "$M3IDX" run "$work/case" --backend host --out "$work/out$i" >"$work/log$i" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
compiled=0
for i in $(seq 8); do
  cmp "$work/ref/topk.npy" "$work/out$i/topk.npy"
  n=$(sed -n 's/.*kernels: \([0-9]*\) compiled.*/\1/p' "$work/log$i")
  compiled=$((compiled + n))
done
echo "compiles across 8 processes: $compiled"
[[ $compiled -eq 2 ]] || { cat "$work"/log*; echo "expected 2 compiles (score_decode, topk_decode)"; exit 1; }
entries=$("$M3IDX" cache stats --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["entries"])')
[[ $entries -eq 2 ]] || { echo "expected 2 cache entries, got $entries"; exit 1; }
"$M3IDX" cache verify >/dev/null
# Dumps are written on cache hits too.
M3IDX_DUMP=dsl,mlir,bin M3IDX_DUMP_DIR="$work/dump" "$M3IDX" run "$work/case" --backend host \
  --out "$work/dumped" | grep -q "0 compiled, 2 from disk cache"
for ext in dsl mlir o; do
  ls "$work"/dump/score_decode.*."$ext" >/dev/null
done
entry=$(ls "$M3IDX_CACHE_DIR"/v1/llvmcache-* | head -1)
"$M3IDX" inspect "$entry" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["schema_version"] == 1 and j["target"] == "host", j'
# A corrupted entry: verify names it and fails; the next run recompiles and stays correct.
printf 'garbage' >> "$entry"
if "$M3IDX" cache verify >/dev/null; then echo "verify passed a corrupted entry"; exit 1; fi
"$M3IDX" run "$work/case" --backend host --out "$work/after" 2>"$work/warn" | grep -q "1 compiled"
grep -q "is unusable" "$work/warn"
cmp "$work/ref/topk.npy" "$work/after/topk.npy"
"$M3IDX" cache clear >/dev/null
[[ $("$M3IDX" cache stats --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["entries"])') -eq 0 ]]
echo "cache_concurrency: ok"
