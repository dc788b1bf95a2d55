#!/usr/bin/env bash
# The compiler's output for every kernel config, as md5 sums against a committed table: sm_90 PTX,
# gfx950 HSACO and the host's LLVM dialect (inspect's own header comment, which names the command,
# left out). The host's is the `lowered` stage, not `llvm`: that one is after LLVM's O3 for the
# CPU of the machine running the test (its cost model picks the vector forms), so a table made on
# one CPU failed on another.
# A refactor of lowering/ must leave every line equal (issue 37); a change meant to alter the code
# updates the table in the same commit and says why (and, for a GPU target, what the H200
# measured). The sums also follow LLVM/MLIR 22's own code generation: after a Debian point release
# of llvm-22 the table is regenerated in a commit of its own that says so.
#   output_hashes.sh M3IDX TABLE TARGET [PART]  compare TARGET's lines of TABLE (exit 1 on a
#                                              difference); PART: decode-h1, decode-h2, decode-h4
#                                              (score_decode at that head count) or others, so that
#                                              ctest runs a target's table in four parts (each a
#                                              process per config: 80 s for all of gfx950's under
#                                              the sanitizers beside a build)
#   output_hashes.sh M3IDX TABLE --update   rewrite TABLE for every target
# Configs: score_decode over heads 1/2/4 x decode_query_len 1..8 (every sm_90 form: one-warp,
# row tiles, warpgroups; on sm_90 also for a step of one request, its small-step form),
# topk_decode over decode_query_len 1..8, score_prefill over heads 1/2/4 (and, on the host and
# sm_90, its form that tops its tiles' rows: "requests=fused"), topk_prefill at its table's rows a
# trip: the axes each kernel's config depends on (tuning/TargetTuning.cpp's configFor).
set -euo pipefail
M3IDX=$1
TABLE=$2
MODE=$3
PART=${4:-all}
case $PART in
  all | others | decode-h1 | decode-h2 | decode-h4) ;;
  *) echo "output_hashes: PART: expected decode-h1, decode-h2, decode-h4 or others, got '$PART'" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

configs() { # TARGET
  local h r
  for h in 1 2 4; do for r in 1 2 3 4 5 6 7 8; do echo "score_decode $h $r"; done; done
  if [[ $1 == sm_90 ]]; then
    for h in 1 2 4; do for r in 1 2 3 4 5 6 7 8; do echo "score_decode $h $r 1"; done; done
  fi
  for r in 1 2 3 4 5 6 7 8; do echo "topk_decode 1 $r"; done
  for h in 1 2 4; do echo "score_prefill $h 4"; done
  # the form that tops its tiles' rows, where the table fuses it (fusedTopkTrip: the host's, sm_90's)
  [[ $1 != gfx950 ]] && for h in 1 2 4; do echo "score_prefill $h 4 fused"; done
  # the form that reads the step's key image, and decode_keys, which writes it
  for h in 1 2 4; do echo "score_prefill $h 4 image"; done
  echo "decode_keys 1 4"
  case $1 in # its table's rows a trip (topkPrefillTripRows)
    host) echo "topk_prefill 1 4" ;;
    sm_90) echo "topk_prefill 1 32" ;;
    gfx950) echo "topk_prefill 1 64" ;;
  esac
}

# md5 of one config's output for one target
hash_of() {
  local target=$1 kernel=$2 heads=$3 rows=$4 requests=${5:-}
  local args=(inspect "$kernel" --heads "$heads" --query-rows "$rows" --target "$target")
  if [[ $requests == fused ]]; then args+=(--fused-topk); elif [[ $requests == image ]]; then args+=(--key-image); elif [[ -n $requests ]]; then args+=(--requests "$requests"); fi
  case $target in
    sm_90) "$M3IDX" "${args[@]}" --emit ptx | sed '1,/^[^/]/{/^\/\//d}' | md5sum ;;
    host) "$M3IDX" "${args[@]}" --emit lowered | sed '1,/^[^/]/{/^\/\//d}' | md5sum ;;
    gfx950) "$M3IDX" "${args[@]}" --emit bin --out "$work/k.hsaco" >/dev/null && md5sum <"$work/k.hsaco" ;;
  esac | cut -d' ' -f1
}

# whether a config "KERNEL H ROWS" or a table line's "KERNEL heads=H" is in PART
in_part() {
  local kernel=$1 heads=${2#heads=}
  case $PART in
    all) return 0 ;;
    others) [[ $kernel != score_decode ]] ;;
    *) [[ $kernel == score_decode && $heads == "${PART#decode-h}" ]] ;;
  esac
}

table_of() {
  local target=$1 kernel heads rows requests h
  while read -r kernel heads rows requests; do
    # a config that does not compile is a failure, not a line without a hash
    h=$(hash_of "$target" "$kernel" "$heads" "$rows" "$requests") ||
      { echo "output_hashes: $target $kernel --heads $heads --query-rows $rows does not compile" >&2; exit 1; }
    echo "$target $kernel heads=$heads rows=$rows${requests:+ requests=$requests} $h"
  done < <(configs "$target" | while read -r kernel heads rows requests; do
    in_part "$kernel" "$heads" && echo "$kernel $heads $rows $requests"
  done)
}

if [[ $MODE == --update ]]; then
  {
    echo "# tests/lowering/output_hashes.sh: target kernel config md5 (regenerate with --update)"
    echo "# made with llvm-22-dev $(dpkg-query -W -f='${Version}' llvm-22-dev 2>/dev/null || echo '(version unknown)')"
    for t in sm_90 gfx950 host; do table_of "$t"; done
  } >"$TABLE"
  echo "wrote $TABLE"
  exit 0
fi

table_of "$MODE" >"$work/now"
while read -r target kernel heads rest; do
  [[ $target == "$MODE" ]] && in_part "$kernel" "$heads" && echo "$target $kernel $heads $rest"
done <"$TABLE" >"$work/committed" || true
if ! diff -u "$work/committed" "$work/now"; then
  echo "output_hashes: $MODE code differs from $TABLE (above: - committed, + now)." >&2
  echo "If the change is meant, rerun: tests/lowering/output_hashes.sh build/bin/m3idx $TABLE --update" >&2
  exit 1
fi
echo "output_hashes: $MODE: $(wc -l <"$work/now") configs equal to the table"
