#!/usr/bin/env bash
# Run here (where LLVM/MLIR are): writes .gpu/ for bench/gpu.sh on the H200 -- the sm_90 PTX of
# every kernel config the cases need, the cases, and the header-only libraries the checker needs
# (the GPU machine has none of our Debian packages). Usage: bench/gpu-prepare.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
M3IDX="$BUILD/bin/m3idx"
rm -rf .gpu && mkdir -p .gpu/ptx .gpu/cases .gpu/include
for heads in 1 2 4; do
  for rows in 1 4; do
    "$M3IDX" inspect score_decode --heads $heads --query-rows $rows --target sm_90 --emit ptx \
      > ".gpu/ptx/score_decode.heads=$heads,rows=$rows.ptx"
  done
  # named by the config the PTX's first line gives (kernels::kSm90PrefillForm's)
  ptx=$("$M3IDX" inspect score_prefill --heads $heads --target sm_90 --emit ptx)
  config=$(head -1 <<<"$ptx" | sed -n 's/.*(\(heads=[^)]*\)).*/\1/p')
  printf '%s\n' "$ptx" > ".gpu/ptx/score_prefill.$config.ptx"
done
for rows in 1 4; do
  "$M3IDX" inspect topk_decode --query-rows $rows --target sm_90 --emit ptx \
    > ".gpu/ptx/topk_decode.heads=1,rows=$rows.ptx"
done
"$M3IDX" inspect topk_prefill --target sm_90 --emit ptx > ".gpu/ptx/topk_prefill.heads=1,rows=0.ptx"
"$M3IDX" inspect topk_merge --target sm_90 --emit ptx > ".gpu/ptx/topk_merge.heads=1,rows=0.ptx"
# Cubins beside the PTX when ptxas is here (m3idx-cuda-check prefers them); the driver JITs the PTX
# otherwise. PTX above is made with PATH limited to /usr/bin:/bin, so this names ptxas explicitly.
PTXAS=${M3IDX_PTXAS:-/usr/local/cuda/bin/ptxas}
if [[ -x $PTXAS ]]; then
  for f in .gpu/ptx/*.ptx; do "$PTXAS" -arch=sm_90a -O3 "$f" -o "${f%.ptx}.cubin"; done
fi

gen() { "$M3IDX" gen --out ".gpu/cases/$1" "${@:2}" >/dev/null; }
gen decode_exact_h4 --seed 1 --mode exact --heads 4 --decodes 8 --context 0:6000 --prefills 0 --init 1 --local 1
gen prefill_exact_h1 --seed 2 --mode exact --heads 1 --decodes 0 --prefills 3 --prefill-len 1:100 --prefill-context 1:3000
gen mixed_nan_h2 --seed 3 --heads 2 --decodes 5 --prefills 2 --context 0:4000 --nan-scales 0.02 --init 2 --local 0
gen decode_q1_h1 --seed 4 --mode exact --heads 1 --decodes 6 --decode-query-len 1 --context 0:900 --prefills 1
gen decode_128k_h1 --seed 5 --heads 1 --decodes 2 --context 131072 --prefills 0
for c in tests/data/golden/*/; do cp -r "$c" .gpu/cases/; done
cp -r /usr/include/fmt /usr/include/nlohmann .gpu/include/
du -sh .gpu
