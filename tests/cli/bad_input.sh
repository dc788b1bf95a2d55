#!/usr/bin/env bash
# Every malformed input exits non-zero with one line naming the argument, and writes no output.
set -uo pipefail
M3IDX=$1
DATA=$2
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
expect_bench_error() { # NAME NEEDLE ARGS...
  local name=$1 needle=$2
  shift 2
  local err
  if err=$("$M3IDX" bench "$@" --backend ref --repeat 1 2>&1 >/dev/null); then
    echo "FAIL $name: exit 0"; failures=$((failures + 1)); return
  fi
  grep -qF -- "$needle" <<<"$err" || { echo "FAIL $name: '$err' lacks '$needle'"; failures=$((failures + 1)); }
}
expect_bench_error bench_shape "--decode: expected COUNT:TOKENS:HEADS" --decode 3:x:1
expect_bench_error bench_zero "--prefill: expected COUNT:TOKENS:HEADS" --prefill 0:100:1
expect_bench_error bench_both "exactly one of them" "$work/good" --decode 1:100:1
expect_bench_error bench_heads "heads" --decode 1:100:3

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

[[ $failures -eq 0 ]] && echo "bad_input: ok" || { echo "bad_input: $failures failures"; exit 1; }
