#!/usr/bin/env bash
# gen -> run -> check through the CLI, CP equality, and the golden exact cases byte for byte.
set -euo pipefail
M3IDX=$1
DATA=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$M3IDX" gen --out "$work/case" --seed 5 --heads 4 --decodes 6 --prefills 2 --context 100:3000 \
  --prefill-len 1:50 --init 1 --local 1 --nan-scales 0.01
"$M3IDX" run "$work/case" --backend ref --out "$work/out" --scores
"$M3IDX" check "$work/case" "$work/out"
"$M3IDX" run "$work/case" --backend ref --out "$work/cp" --cp 4
cmp "$work/out/topk.npy" "$work/cp/topk.npy"

# Same shape, dtype and data (header padding styles differ between writers).
same_npy() {
  python3 - "$1" "$2" <<'PY'
import ast, sys
def load(p):
    d = open(p, 'rb').read()
    hl = int.from_bytes(d[8:10], 'little')
    h = ast.literal_eval(d[10:10 + hl].decode())
    return h['descr'], tuple(h['shape']), d[10 + hl:]
a, b = load(sys.argv[1]), load(sys.argv[2])
sys.exit(0 if a == b else 1)
PY
}
for backend in ref host; do
  for c in decode_exact prefill_exact decode_edge_nan_scales; do
    "$M3IDX" run "$DATA/golden/$c" --backend $backend --out "$work/$backend-$c"
    same_npy "$work/$backend-$c/topk.npy" "$DATA/golden/$c/expected/topk.npy"
  done
  "$M3IDX" run "$DATA/golden/mixed_realistic" --backend $backend --out "$work/$backend-mixed" --scores
  "$M3IDX" check "$DATA/golden/mixed_realistic" "$work/$backend-mixed"
done

# The host JIT on a generated exact-valued case equals the reference, scores included.
"$M3IDX" gen --out "$work/exact" --seed 9 --mode exact --heads 2 --decodes 5 --prefills 2 \
  --context 0:5000 --prefill-len 1:30 --init 1 --local 2 --nan-scales 0.005
"$M3IDX" run "$work/exact" --backend ref --out "$work/exact-ref" --scores
"$M3IDX" run "$work/exact" --backend host --out "$work/exact-host" --scores
same_npy "$work/exact-ref/topk.npy" "$work/exact-host/topk.npy"
same_npy "$work/exact-ref/score.npy" "$work/exact-host/score.npy"
"$M3IDX" run "$work/case" --backend host --out "$work/host" --scores
"$M3IDX" check "$work/case" "$work/host"
# Decode CP over 4 in-process ranks on the host backend: the same top-k as without CP.
"$M3IDX" run "$work/case" --backend host --cp 4 --out "$work/host-cp"
same_npy "$work/host/topk.npy" "$work/host-cp/topk.npy"
# The checker must also accept the independent implementation's own output.
"$M3IDX" check "$DATA/golden/mixed_realistic" "$DATA/golden/mixed_realistic/expected"

# A corrupted output must fail the check: point every slot of row 0 at block 0.
cp -r "$work/out" "$work/bad"
python3 - "$work/bad/topk.npy" <<'PY'
import sys
p = sys.argv[1]
d = bytearray(open(p, 'rb').read())
hl = int.from_bytes(d[8:10], 'little')
for s in range(16):
    d[10 + hl + 4 * s:10 + hl + 4 * s + 4] = (0).to_bytes(4, 'little')
open(p, 'wb').write(d)
PY
rm -f "$work/bad/score.npy"
if "$M3IDX" check "$work/case" "$work/bad"; then
  echo "check accepted a corrupted topk.npy" >&2
  exit 1
fi
# Generated steps by shape, timed and checked (exact scores) on the host backend.
"$M3IDX" bench --decode 3:1000:2 --backend host --repeat 2 --warmup 1 --check | grep -q "top-k OK"
"$M3IDX" bench --prefill 2:300:1 --backend host --repeat 2 --warmup 1 --check | grep -q "TFLOP/s"

echo "end_to_end: ok"
