#!/usr/bin/env bash
# Every malformed input exits non-zero with one line naming the argument, and writes no output.
set -uo pipefail
M3IDX=$1
DATA=$2
FAKE_CUDA=${3:-} # tests/runtime/cuda/fake_cuda.c's library: a driver whose device and version we choose
# Which half (ctest runs each as a test of its own, to keep either well under a minute when
# sanitized): `cases` (malformed cases and options of run and bench), `tools` (drivers, kernel
# caches, AOT bundles, inspect), or both (default).
part=${4:-all}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

"$M3IDX" gen --out "$work/good" --seed 1 --heads 2 --decodes 2 --prefills 1 >/dev/null || exit 1

# expect_error NAME NEEDLE CASE_DIR [extra run args]
expect_error() {
  local name=$1 needle=$2 dir=$3
  shift 3
  local out="$work/out_$name"
  local err
  err=$("$M3IDX" run "$dir" --backend ref --out "$out" "$@" 2>&1 >/dev/null)
  local rc=$?
  local lines
  lines=$(printf '%s\n' "$err" | grep -c .)
  if [[ $rc -eq 0 ]]; then
    echo "FAIL $name: exit 0"; failures=$((failures + 1)); return
  fi
  if [[ $lines -ne 1 || "$err" != *"$needle"* || "$err" != *expected* ]]; then
    echo "FAIL $name: message '$err' lacks '$needle' or is not one line"; failures=$((failures + 1)); return
  fi
  if [[ -e "$out" && -n "$(ls -A "$out")" ]]; then
    echo "FAIL $name: left output behind"; failures=$((failures + 1)); return
  fi
  echo "ok   $name: $err"
}

mutate() { # mutate NAME: copy the good case to $work/NAME and print its path
  rm -rf "$work/$1"; cp -r "$work/good" "$work/$1"; echo "$work/$1"
}

# Rewrite one int32 element of an .npy file (v1 header).
poke_i32() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys
p, i, v = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = bytearray(open(p, 'rb').read())
hl = int.from_bytes(d[8:10], 'little')
d[10 + hl + 4 * i:10 + hl + 4 * i + 4] = v.to_bytes(4, 'little', signed=True)
open(p, 'wb').write(d)
PY
}
set_json() { # set_json DIR KEY VALUE
  python3 - "$1/case.json" "$2" "$3" <<'PY'
import json, sys
p, k, v = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
j = json.load(open(p)); j[k] = v; json.dump(j, open(p, 'w'))
PY
}

# expect_bench_error NAME NEEDLE ARGS...: `m3idx bench ARGS` fails naming NEEDLE.
expect_bench_error() { # NAME NEEDLE ARGS...
  local name=$1 needle=$2
  shift 2
  local err
  if err=$("$M3IDX" bench "$@" --backend ref --repeat 1 2>&1 >/dev/null); then
    echo "FAIL $name: exit 0"; failures=$((failures + 1)); return
  fi
  grep -qF -- "$needle" <<<"$err" || { echo "FAIL $name: '$err' lacks '$needle'"; failures=$((failures + 1)); }
}

if [[ $part != tools ]]; then
d=$(mutate heads); set_json "$d" num_index_heads 3; expect_error heads num_index_heads "$d"
d=$(mutate init); set_json "$d" init_blocks -1; expect_error init init_blocks "$d"
d=$(mutate local); set_json "$d" local_blocks -1; expect_error local local_blocks "$d"
d=$(mutate format); set_json "$d" format '"m3idx-case/2"'; expect_error format format "$d"
d=$(mutate decodeq); set_json "$d" decode_query_len 3; expect_error decode_rows query_start_loc "$d"
d=$(mutate seqlen); poke_i32 "$d/seq_lens.npy" 2 0; expect_error prefill_seq_len "seq_lens[2]" "$d"
d=$(mutate qsl); poke_i32 "$d/query_start_loc.npy" 2 3; expect_error qsl_monotone query_start_loc "$d"
d=$(mutate qslT); poke_i32 "$d/query_start_loc.npy" 3 1000; expect_error qsl_rows "query_start_loc[3]" "$d"
d=$(mutate page); poke_i32 "$d/block_table.npy" 0 999999; expect_error page_id "block_table[0][0]" "$d"
d=$(mutate blocks); poke_i32 "$d/seq_lens.npy" 0 1048577; expect_error too_many_blocks "seq_lens[0]" "$d"
d=$(mutate trunc); head -c 200 "$work/good/kv.npy" > "$d/kv.npy"; expect_error truncated kv.npy "$d"
d=$(mutate notnpy); echo hello > "$d/q.npy"; expect_error not_npy q.npy "$d"
d=$(mutate missing); rm "$d/block_table.npy"; expect_error missing block_table.npy "$d"
d=$(mutate dtype); python3 - "$d/seq_lens.npy" <<'PY'
import sys
p = sys.argv[1]; d = open(p, 'rb').read().replace(b"'<i4'", b"'<f4'"); open(p, 'wb').write(d)
PY
expect_error dtype seq_lens.npy "$d"
expect_error no_case CASE "$work/does_not_exist"
expect_error cp_heads "--cp" "$work/good" --cp 4

# An unwritable output location is an error, not a crash.
touch "$work/afile"
if "$M3IDX" run "$work/good" --backend ref --out "$work/afile/sub" 2>/dev/null; then
  echo "FAIL unwritable_out: exit 0"; failures=$((failures + 1))
fi
if "$M3IDX" run "$work/good" --backend nope --out "$work/x" 2>/dev/null; then
  echo "FAIL unknown_backend: exit 0"; failures=$((failures + 1))
fi

# bench by shape: a malformed shape, or a shape and a case together, names the option.
expect_bench_error bench_shape "--decode: expected COUNT:TOKENS:HEADS" --decode 3:x:1
expect_bench_error bench_zero "--prefill: expected COUNT:TOKENS:HEADS" --prefill 0:100:1
expect_bench_error bench_both "exactly one of them" "$work/good" --decode 1:100:1
expect_bench_error bench_heads "heads" --decode 1:100:3
expect_bench_error bench_variant "--topk-prefill-long-rows/--fused-topk-max-blocks/--key-image-min-reads: expected --backend cuda" --decode 1:100:1 --fused-topk-max-blocks 0
expect_bench_error bench_variant_image "--key-image-min-reads: expected --backend cuda" --prefill 1:300:1 --key-image-min-reads 4
expect_bench_error bench_variant_topk "expected --backend cuda" --prefill 1:100:1 --topk-prefill-rows 4
expect_bench_error bench_variant_requests "expected --backend cuda" --decode 1:100:1 --decode-warpgroup-requests 8
fi

if [[ $part != cases ]]; then
# cache-bench on a backend that compiles nothing, or a GPU without its driver: one line, non-zero.
if err=$("$M3IDX" cache-bench --backend ref 2>&1 >/dev/null); then
  echo "FAIL cache_bench_ref: exit 0"; failures=$((failures + 1))
elif ! grep -qF -- "--backend: expected host, cuda or hip" <<<"$err"; then
  echo "FAIL cache_bench_ref: '$err'"; failures=$((failures + 1))
fi
if err=$("$M3IDX" cache-bench --repeat 0 2>&1 >/dev/null); then
  echo "FAIL cache_bench_repeat: exit 0"; failures=$((failures + 1))
elif ! grep -qF -- "--repeat: expected >= 1, got 0" <<<"$err"; then
  echo "FAIL cache_bench_repeat: '$err'"; failures=$((failures + 1))
fi
if M3IDX_CUDA_LIBRARY=libm3idx-no-such-driver.so "$M3IDX" cache-bench --backend cuda >/dev/null 2>&1; then
  echo "FAIL cache_bench_no_driver: exit 0"; failures=$((failures + 1))
fi

# expect_one_line NAME NEEDLE [VAR=VALUE...] -- m3idx ARGS (their --out is $work/out_NAME): non-zero
# exit, exactly one line on stderr containing NEEDLE, no output folder left.
expect_one_line() {
  local name=$1 needle=$2 vars=()
  shift 2
  while [[ $1 != -- ]]; do vars+=("$1"); shift; done
  shift
  local out="$work/out_$name" err rc
  err=$(env "${vars[@]}" "$M3IDX" "$@" --out "$out" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -eq 0 ]]; then
    echo "FAIL $name: exit 0"; failures=$((failures + 1))
  elif [[ $(printf '%s\n' "$err" | grep -c .) -ne 1 || "$err" != *"$needle"* ]]; then
    echo "FAIL $name: '$err' lacks '$needle' or is not one line"; failures=$((failures + 1))
  elif [[ -e $out ]]; then
    echo "FAIL $name: left $out behind"; failures=$((failures + 1))
  else
    echo "ok   $name: $err"
  fi
}
good=$work/good
expect_one_line run_indexer_host "--indexer: expected --backend cuda or hip" -- run "$good" --indexer
expect_one_line run_device_tables "--device-tables: expected --indexer" -- run "$good" --device-tables
expect_one_line run_no_driver "cannot load the driver library" M3IDX_CUDA_LIBRARY=libm3idx-no-such-driver.so \
  -- run "$good" --backend cuda
if [[ -n $FAKE_CUDA ]]; then
  expect_one_line run_not_sm90 "is sm_80; m3idx's CUDA kernels are built for sm_90 only" \
    M3IDX_CUDA_LIBRARY="$FAKE_CUDA" M3IDX_FAKE_CUDA_CC=80 -- run "$good" --backend cuda
  expect_one_line run_indexer_not_sm90 "is sm_86" M3IDX_CUDA_LIBRARY="$FAKE_CUDA" M3IDX_FAKE_CUDA_CC=86 \
    -- run "$good" --backend cuda --indexer
  # The top-k goes out as a programmatic launch (cuLaunchKernelEx, cuda.h's attribute layout):
  # the stand-in refusing it is the step's one-line error.
  expect_one_line run_indexer_programmatic "topk_decode failed: operation not permitted" \
    M3IDX_CUDA_LIBRARY="$FAKE_CUDA" M3IDX_FAKE_CUDA_REFUSE_EX=1 M3IDX_CACHE_DIR="$work/cuda-cache" \
    -- run "$good" --backend cuda --indexer
  expect_one_line run_old_driver "supports CUDA 12.2, and m3idx's PTX (ISA 8.4) needs a driver for CUDA 12.4" \
    M3IDX_CUDA_LIBRARY="$FAKE_CUDA" M3IDX_FAKE_CUDA_VERSION=12020 M3IDX_CACHE_DIR="$work/cuda-cache" \
    -- run "$good" --backend cuda
else
  echo "skip run_not_sm90, run_old_driver: no stand-in driver library given (third argument)"
fi
# A corrupted AOT bundle entry or cache entry where nothing may be compiled: one line naming it.
"$M3IDX" compile --target host --heads 2 --out "$work/bundle" >/dev/null || exit 1
for f in "$work"/bundle/llvmcache-*; do printf 'XXXX' | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null; done
expect_one_line aot_corrupt "checksum mismatch (corrupted)" M3IDX_RUN_ONLY=1 M3IDX_AOT_PATH="$work/bundle" \
  M3IDX_CACHE_DIR="$work/empty-cache" -- run "$good" --backend host
"$M3IDX" run "$good" --backend host --out "$work/warm" >/dev/null 2>&1 || exit 1 # fills $M3IDX_CACHE_DIR
cp -r "${M3IDX_CACHE_DIR:?}" "$work/corrupt-cache"
for f in "$work"/corrupt-cache/v1/llvmcache-*; do printf 'XXXX' | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null; done
expect_one_line cache_corrupt "is unusable (" M3IDX_RUN_ONLY=1 M3IDX_CACHE_DIR="$work/corrupt-cache" \
  -- run "$good" --backend host
# A corrupted cache entry where compiling is allowed: a warning, then the right answer.
rm -rf "$work/corrupt-cache" && cp -r "$M3IDX_CACHE_DIR" "$work/corrupt-cache"
for f in "$work"/corrupt-cache/v1/llvmcache-*; do printf 'XXXX' | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null; done
if ! M3IDX_CACHE_DIR="$work/corrupt-cache" "$M3IDX" run "$good" --backend host --out "$work/recovered" >/dev/null 2>&1 ||
  ! "$M3IDX" check "$good" "$work/recovered" >/dev/null; then
  echo "FAIL cache_corrupt_recompiles"; failures=$((failures + 1))
fi
# A kernel cache or AOT folder others can write: refused in one line, unless trusted explicitly.
mkdir -p "$work/shared-cache" && chmod 0777 "$work/shared-cache"
expect_one_line cache_shared "kernel cache folder $work/shared-cache is writable by others (mode 0777)" \
  M3IDX_CACHE_DIR="$work/shared-cache" -- run "$good" --backend host
if ! M3IDX_TRUST_SHARED_CACHE=1 M3IDX_CACHE_DIR="$work/shared-cache" "$M3IDX" run "$good" --backend host \
  --out "$work/trusted" >/dev/null 2>&1; then
  echo "FAIL cache_shared_trusted: M3IDX_TRUST_SHARED_CACHE=1 did not let the run through"; failures=$((failures + 1))
fi
"$M3IDX" compile --target host --heads 2 --out "$work/bundle2" >/dev/null || exit 1
chmod 0775 "$work/bundle2"
expect_one_line aot_shared "AOT bundle folder $work/bundle2 is writable by its group (mode 0775)" \
  M3IDX_AOT_PATH="$work/bundle2" -- run "$good" --backend host
expect_bench_error bench_indexer_host "--indexer: expected --backend cuda or hip" --decode 1:100:1 --indexer
expect_bench_error bench_cp_prefill "--cp-share: expected WORLD >= 2 with a --decode shape" --prefill 1:100:1 \
  --cp-share 4
# inspect's --emit: what the target's binary kind offers, named in the error.
expect_one_line inspect_emit_host "--emit: expected dsl, tile, mlir, lowered, llvm or asm for host, got 'ptx'" \
  -- inspect topk_decode --target host --emit ptx
expect_one_line inspect_emit_sm90 "--emit: expected dsl, tile, layouts, mlir, lowered, llvm or ptx for sm_90, got 'bin'" \
  -- inspect topk_decode --target sm_90 --emit bin
expect_one_line inspect_emit_gfx950 "llvm, bin, meta or asm for gfx950, got 'ptx'" \
  -- inspect topk_decode --target gfx950 --emit ptx
fi

[[ $failures -eq 0 ]] && echo "bad_input ($part): ok" || { echo "bad_input ($part): $failures failures"; exit 1; }
