#!/usr/bin/env bash
# Faults while writing: writers killed (SIGKILL) at random moments -- `m3idx run --out` over an
# earlier complete output, `m3idx compile --out` into a bundle, and kernel cache stores (a run with
# an empty cache) -- leave only complete files that a later run accepts: after every kill the output
# folder holds the old or the new top-k and it checks, `cache verify` passes on the cache and on the
# bundle, and a run from them is right. 50 kills, delays uniform in 0-600 ms (seeded: reproducible).
# Usage: kill_writers.sh M3IDX
set -uo pipefail
M3IDX=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
RANDOM=23

"$M3IDX" gen --out "$work/case" --seed 3 --heads 2 --decodes 3 --prefills 1 --context 100:2000 >/dev/null || exit 1
"$M3IDX" run "$work/case" --backend ref --out "$work/out" --scores >/dev/null || exit 1

kill_after() { # MS CMD...: run CMD, SIGKILL it after MS milliseconds if still running
  local ms=$1
  shift
  "$@" >/dev/null 2>&1 &
  local pid=$!
  sleep "$(printf '0.%03d' "$ms")"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

for i in $(seq 1 50); do
  ms=$((RANDOM % 600))
  case $((i % 3)) in
    0) # run --out over a complete earlier output (the ref backend writes at once: host compiles first)
      kill_after "$ms" env M3IDX_CACHE_DIR="$work/run-cache" "$M3IDX" run "$work/case" --backend host \
        --out "$work/out" --scores
      if ! "$M3IDX" check "$work/case" "$work/out" >/dev/null 2>&1; then
        echo "FAIL kill $i ($ms ms, run --out): the output folder does not check"; failures=$((failures + 1))
      fi ;;
    1) # compile --out into a bundle folder
      kill_after "$ms" env M3IDX_CACHE_DIR="$work/compile-cache" "$M3IDX" compile --target host --heads 2 \
        --out "$work/bundle"
      if [[ -d $work/bundle ]] && ! "$M3IDX" cache verify --dir "$work/bundle" >/dev/null 2>&1; then
        echo "FAIL kill $i ($ms ms, compile --out): $("$M3IDX" cache verify --dir "$work/bundle" 2>&1 | tail -1)"
        failures=$((failures + 1))
      fi ;;
    2) # cache stores: a run compiling into an empty cache
      rm -rf "$work/store-cache"
      kill_after "$ms" env M3IDX_CACHE_DIR="$work/store-cache" "$M3IDX" run "$work/case" --backend host \
        --out "$work/store-out"
      if [[ -d $work/store-cache/v1 ]] && ! "$M3IDX" cache verify --dir "$work/store-cache/v1" >/dev/null 2>&1; then
        echo "FAIL kill $i ($ms ms, cache store): $("$M3IDX" cache verify --dir "$work/store-cache/v1" 2>&1 | tail -1)"
        failures=$((failures + 1))
      fi ;;
  esac
done
# What the killed writers left is used: the last cache, and the bundle alone, serve a right answer.
for src in "M3IDX_CACHE_DIR=$work/store-cache" "M3IDX_AOT_PATH=$work/bundle M3IDX_CACHE_DIR=$work/empty"; do
  # shellcheck disable=SC2086
  if ! env $src "$M3IDX" run "$work/case" --backend host --out "$work/after" >/dev/null 2>&1 ||
    ! "$M3IDX" check "$work/case" "$work/after" >/dev/null 2>&1; then
    echo "FAIL after the kills: a run with $src is not right"; failures=$((failures + 1))
  fi
done
[[ $failures -eq 0 ]] && echo "kill_writers: 50 kills, ok" || { echo "kill_writers: $failures failures"; exit 1; }
