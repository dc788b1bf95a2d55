#!/usr/bin/env bash
# On the H200 (device tool): m3idx as a user deploys it, the archive of ./scripts/package unpacked
# and nothing else of ours (no LLVM, no compiler of ours), next to the yardsticks. Carry `carry`:
# carry/dist/m3idx-*.tar.xz (and m3idx-tests-*.tar.xz for `tests`), carry/bundle (an AOT bundle made
# here by the archive's `m3idx compile --target sm_90`, for `aot`) and carry/peers (a copy of
# ../shared/peers, for `peers`). Cases are generated there by the archive's `m3idx gen`. Logs go to
# $OUT. Stages:
#   check    every golden case and generated ones (decode, prefill, mixed, NaN scales, 1M-token
#            rows, decode_query_len 1 and 4, 1/2/4 heads) through `m3idx run --backend cuda` +
#            `m3idx check`, first with an empty kernel cache (DSL -> PTX in process, the driver's
#            load), then warm, then through the Indexer API (--indexer, block table on the host and
#            on the device)
#   aot      the same cases with M3IDX_RUN_ONLY=1 and only carry/bundle: zero compiles
#   tests    the test bundle's run-tests (unit tests and the CLI's GPU tests) with the archive
#   cache    `m3idx cache-bench --backend cuda` (cold compile + load, disk hit, memory hit)
#   bench    decode steps 256 x 32K, 256 x 128K (H=1), 64 x 128K (H=4), 8 x 1M by `m3idx bench
#            --backend cuda` (events, L2 flushed, median of 25, the copy beside it); bench-checked
#            also checks each against the reference on the CPU (minutes)
#   prefill  4 prompts x 32K (H=1, 4) and 64 x 2K, next to the fp8 and f16 tensor-core peaks
#   indexer  Indexer::forward of the decode steps next to the backend's launches (`bench --indexer`)
#   cp       one decode-CP rank's share of 256-request steps, checked and timed (`bench --cp-share 4`)
#   peers    vLLM's own Triton path (carry/peers/run_vllm_peer.py) and the fastest PyTorch version
#            known (carry/peers/torch_indexer.py) on the same shapes
#   torch, torch-prefill   PyTorch eager and torch.compile (bench/torch_reference.py)
#   table    bench, prefill, peers, torch and torch-prefill, joined by bench/table.py
#   python   the archive's Python package on PyTorch CUDA tensors: golden and generated cases
#            through m3idx.Indexer(device="cuda").forward (host and device metadata), checked; then
#            decode() on device metadata: eager, CUDA-graph replays (decode_query_len 1, 4, 8;
#            padding, a 1M-token row, a bad page id) and torch.compile, checked
#   wheel    the wheel (carry/dist/m3idx-*.whl) installed by `pip install --no-index --target`: the CUDA
#            Python tests, torch.ops.m3idx.decode and bench/graph_decode.py from the installed copy
#   graph    bench/graph_decode.py: forward(), decode() plain and graph-replayed, host us a call,
#            next to vLLM's path plain and graph-replayed (carry/peers), one process
#   prompts  bench/prompt_steps.py: fresh and chunked prompt steps x H 1/2/4 through plan() + run()
#            (and forward()), an engine step's layers from one plan, host us of plan() and run(), next
#            to vLLM's prefill and the f16 floor, each checked against bench/torch_reference.py
#            (prompt_steps.md, prompt_steps.png; $PROMPT_ARGS passes --shapes / --heads / --runs)
#   host-time  bench/decode_host_time.py: decode()'s host time per shape next to the floors of its moment
#   envelope bench/decode_envelope.py: decode graph replays over R x L x H (capacity 1M and L) next to
#            vLLM's graph, each checked against bench/torch_reference.py; envelope.md and envelope.png
#            (no shape started after $ENVELOPE_BUDGET_S seconds, when set; only $ENVELOPE_SHAPES, R:L:H:Q
#            comma-separated, when set; each kernel's time per step too with ENVELOPE_PROFILE=1)
#   example  examples/indexer_step built with CMake through find_package(m3idx) and run
#   sanitize every kernel config (decode_query_len 1/4/8 x 1/2/4 heads, 6 x 4, prefill, 1M-token rows)
#            under compute-sanitizer memcheck, racecheck, initcheck and synccheck (memcheck also through
#            --indexer --device-tables), on generated cases with garbage in unused slots and pages
#            ($SANITIZE_CASES: only these case names, e.g. "mixed_q8_h4 mixed_q6_h4"; $SANITIZE_TOOLS: only these tools)
#   variants decode steps (the shapes of bench, and 8 rows a request for 64 x 128K at H=1 and 4, or
#            $VARIANT_SHAPES) under each tuning variant of $VARIANTS (';'-separated `m3idx bench` knobs, '' the
#            table's own), side by side in one process per shape and variant; each variant also
#            checked against exact scores on small steps (1, 4 heads; 4, 6, 8 rows; or $VARIANT_CHECK_SHAPES)
#   prefill-variants  prompt steps ($PREFILL_VARIANT_SHAPES) under each tuning variant of $VARIANTS, side
#            by side as `variants` does for decode
#   ab       prompt steps ($AB_SHAPES, bench's prefill shapes by default) by this archive and by another
#            one (carry/old/m3idx-*-linux-x86_64.tar.xz: the code before a change), interleaved, each
#            with a compile cache of its own: a change's speed-up from one call
#   profile  Nsight Compute (clocks left alone) on the score kernels of the bench shapes and on the
#            score and top-k of prefill 4 x 32K (or $PROFILE_DECODE / $PROFILE_PREFILL, either set empty
#            for none of its kind): speed of light, pipes, occupancy, warp stalls
#   sass     the machine code of the score kernels (the archive's PTX, the machine's ptxas)
#   ceiling, wgmma   the probes bench/page_read_ceiling.cu and bench/wgmma_probe.cu (nvcc)
#   fa3      bench/prefill_fa3_probe.cu (nvcc): the prefill score hand-written in FlashAttention-3's
#            layout (a producer warpgroup decoding keys into a shared-memory ring, two consumer
#            warpgroups on wgmma), checked and timed on $FA3_SHAPES ("P L H [BLOCKS]", ';'-separated)
#   probe    bench/nvfp4_decode_probe.cu (nvcc): the exact decode score hand-written, its SASS, 4 shapes
#   small-step  bench/small_step_probe.cu (nvcc): the smallest step's dependent chain graph-replayed,
#            one launch, two, two with programmatic dependent launch ($SMALL_STEP_TOKENS, 4096 and 1024)
#   cp-group bench/decode_cp_group.py: four processes on the one GPU, each with one m3idx.DecodeCp.init
#            group joined by two Indexers of one head (layers); CP decode steps eager and graph-replayed,
#            and forward()'s decode rows, against local ones, bit for bit, timed beside them; then a rank
#            exits and the others must name it ($CP_GROUP_ARGS)
#   ipc      bench/ipc_push_probe.cu (nvcc, -lcuda): four processes on the one GPU mapping their score
#            receive buffers as one array (driver VMM, descriptors over sockets) and ordering steps
#            on the device: eager, graph-replayed, and with a rank that dies ($IPC_PROBE_ARGS:
#            STEPS ROWS W TIMEOUT_MS, default 200 1024 8192 2000)
# Usage: bench/gpu.sh STAGE...
set -euo pipefail
OUT=${OUT:-/tmp}
stages=("$@")
[[ ${#stages[@]} -eq 0 ]] && stages=(check aot bench)
decode_shapes=(256:32768:1 256:131072:1 64:131072:4 8:1048576:1)
prefill_shapes=(4:32768:1 4:32768:4 64:2048:1)
unpack() { # DIR FOLDER: FOLDER's archive unpacked into DIR, once
  if [[ ! -x $1/bin/m3idx ]]; then
    mkdir -p "$1"
    tar -C "$1" --strip-components=1 -xJf "$(ls "$2"/m3idx-[0-9]*-linux-x86_64.tar.xz)"
  fi
}
root=/tmp/m3idx-archive
unpack "$root" carry/dist
m3idx=$root/bin/m3idx
export M3IDX_CACHE_DIR=/tmp/m3idx-cache
cases=/tmp/m3idx-cases
make_cases() {
  [[ -d $cases ]] && return
  gen() { "$m3idx" gen --out "$cases/$1" "${@:2}" >/dev/null; }
  gen decode_exact_h4 --seed 1 --mode exact --heads 4 --decodes 8 --context 0:6000 --prefills 0 --init 1 --local 1
  gen prefill_exact_h1 --seed 2 --mode exact --heads 1 --decodes 0 --prefills 3 --prefill-len 1:100 --prefill-context 1:3000
  gen mixed_nan_h2 --seed 3 --heads 2 --decodes 5 --prefills 2 --context 0:4000 --nan-scales 0.02 --init 2 --local 0
  gen decode_q1_h1 --seed 4 --mode exact --heads 1 --decodes 6 --decode-query-len 1 --context 0:900 --prefills 1
  gen decode_128k_h1 --seed 5 --heads 1 --decodes 2 --context 131072 --prefills 0
  gen decode_1m_h2 --seed 6 --mode exact --heads 2 --decodes 1 --context 1048576 --prefills 0
  gen mixed_1m_h1 --seed 7 --heads 1 --decodes 1 --context 1048576 --prefills 1 --prefill-len 1:9 \
    --prefill-context 1048576
  gen prefill_h4 --seed 8 --heads 4 --decodes 0 --prefills 3 --prefill-len 1:300 --prefill-context 1:3000
  gen decode_q1_h4 --seed 9 --heads 4 --decodes 16 --decode-query-len 1 --context 0:20000 --prefills 0
  gen decode_q8_h4 --seed 10 --mode exact --heads 4 --decodes 12 --decode-query-len 8 --context 0:9000 \
    --prefills 1 --init 1 --local 1
  gen decode_q6_h4 --seed 11 --heads 4 --decodes 20 --decode-query-len 6 --context 0:70000 --prefills 0 \
    --nan-scales 0.01
  for c in tests/data/golden/*/; do cp -r "$c" "$cases/"; done
}
run_all() { # LABEL [VAR=VALUE...] [-- RUN ARGS...]: every case run and checked, the cases in parallel
  local label=$1 vars=() args=()
  shift
  while [[ $# -gt 0 && $1 != -- ]]; do vars+=("$1"); shift; done
  [[ $# -gt 0 ]] && { shift; args=("$@"); }
  mkdir -p "/tmp/m3idx-out/$label"
  for c in "$cases"/*/; do
    (
      name=$(basename "$c")
      out=/tmp/m3idx-out/$label/$name
      if env "${vars[@]}" "$m3idx" run "$c" --backend cuda --out "$out" "${args[@]}" >"$out.log" 2>&1 &&
        "$m3idx" check "$c" "$out" >>"$out.log" 2>&1
      then echo "ok $label $name: $(head -1 "$out.log")"
      else echo "FAILED: $label $name: $(tail -1 "$out.log")"; touch "$out.failed"; fi
    ) &
  done
  wait
  echo "$label: $(ls -d "$cases"/*/ | wc -l) cases, $(ls /tmp/m3idx-out/"$label"/*.failed 2>/dev/null | wc -l) failed"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
for stage in "${stages[@]}"; do
  case $stage in
    check)
      make_cases
      ldd "$root/lib/libm3idx.so" "$root/bin/m3idx" | tee "$OUT/gpu-ldd.log"
      rm -rf "$M3IDX_CACHE_DIR"
      {
        run_all cold
        run_all warm
        run_all indexer -- --indexer
        run_all indexer-device-tables -- --indexer --device-tables
      } 2>&1 | tee "$OUT/gpu-check.log" ;;
    aot)
      make_cases
      run_all aot M3IDX_CACHE_DIR=/tmp/m3idx-empty-cache M3IDX_RUN_ONLY=1 M3IDX_AOT_PATH="$PWD/carry/bundle" \
        2>&1 | tee "$OUT/gpu-aot.log" ;;
    tests)
      rm -rf /tmp/m3idx-tests && mkdir -p /tmp/m3idx-tests
      tar -C /tmp/m3idx-tests --strip-components=1 -xJf "$(ls carry/dist/m3idx-tests-*.tar.xz)"
      M3IDX=$m3idx M3IDX_CACHE_DIR=/tmp/m3idx-tests-cache /tmp/m3idx-tests/run-tests 2>&1 |
        tee "$OUT/gpu-tests.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^(ok|FAIL|skip)|gpu_cli" ;;
    cache)
      rm -rf ~/.nv/ComputeCache
      for heads in 1 4; do "$m3idx" cache-bench --backend cuda --heads $heads --repeat 5; done 2>&1 |
        tee "$OUT/gpu-cache.log" ;;
    bench|bench-checked)
      flag=$([[ $stage == bench-checked ]] && echo --check || true)
      for shape in "${decode_shapes[@]}"; do
        # shellcheck disable=SC2086
        "$m3idx" bench --backend cuda --decode "$shape" --repeat 25 $flag
      done 2>&1 | tee "$OUT/gpu-bench.log" ;;
    prefill)
      for shape in "${prefill_shapes[@]}"; do "$m3idx" bench --backend cuda --prefill "$shape" --repeat 25; done 2>&1 |
        tee "$OUT/gpu-prefill.log"
      python3 bench/torch_reference.py --fp8-peak --f16-peak 2>&1 | tee -a "$OUT/gpu-prefill.log" ;;
    indexer)
      for shape in "${decode_shapes[@]}"; do "$m3idx" bench --backend cuda --decode "$shape" --repeat 25 --indexer; done \
        2>&1 | tee "$OUT/gpu-indexer.log" ;;
    cp)
      for tokens in 32768 131072; do # 256 x 1M with 4 heads: 19 GB to generate, past one device call
        "$m3idx" bench --backend cuda --decode 256:$tokens:1 --cp-share 4 --repeat 20
      done 2>&1 | tee "$OUT/gpu-cp.log" ;;
    peers)
      python3 carry/peers/run_vllm_peer.py 2>&1 | tee "$OUT/peers.log"
      python3 carry/peers/torch_indexer.py 2>&1 | tee "$OUT/peers-torch.log" ;;
    torch-prefill)
      python3 bench/torch_reference.py --bench-prefill "${prefill_shapes[@]//:/ }" 2>&1 | tee -a "$OUT/gpu-prefill.log" ;;
    torch)
      python3 bench/torch_reference.py --check tests/data/golden/decode_exact tests/data/golden/decode_edge_nan_scales \
        tests/data/golden/prefill_exact tests/data/golden/mixed_realistic --bench "${decode_shapes[@]//:/ }" \
        2>&1 | tee "$OUT/torch-bench.log" ;;
    table)
      OUT="$OUT" bash "$0" bench prefill peers torch torch-prefill >/dev/null 2>&1 || true
      python3 bench/table.py "$OUT" 2>&1 | tee "$OUT/table.md" ;;
    python)  # the archive's python/m3idx with PyTorch CUDA tensors (tests/python/test_indexer_cuda.py)
      for t in test_indexer_cuda test_decode_cuda; do
        PYTHONPATH=$root/python M3IDX_CLI=$m3idx python3 tests/python/$t.py
      done 2>&1 | tee "$OUT/gpu-python.log" ;;
    wheel)
      {
        target=/tmp/m3idx-wheel
        rm -rf "$target"
        python3 -m pip install --no-index --no-deps --quiet --target "$target" carry/dist/m3idx-*-manylinux_2_28_x86_64.whl
        PYTHONPATH=$target python3 -c "
import os, torch, m3idx, m3idx._torch_ops
assert m3idx.__file__.startswith('$target/'), m3idx.__file__
assert m3idx.library_path() == '$target/m3idx/libm3idx.so', m3idx.library_path()
assert hasattr(torch.ops.m3idx, 'decode'), 'no torch.ops.m3idx.decode'
print('wheel: m3idx from', os.path.dirname(m3idx.__file__), '; torch.ops.m3idx.decode registered')"
        for t in test_indexer_cuda test_decode_cuda; do
          PYTHONPATH=$target M3IDX_CLI=$target/bin/m3idx python3 tests/python/$t.py
        done
        PYTHONPATH=$target python3 bench/graph_decode.py --peers carry/peers
      } 2>&1 | tee "$OUT/gpu-wheel.log" ;;
    graph)
      PYTHONPATH=$root/python python3 bench/graph_decode.py --peers carry/peers 2>&1 | tee "$OUT/gpu-graph.log" ;;
    prompts)
      PYTHONPATH=$root/python:bench python3 bench/prompt_steps.py --peers carry/peers --out "$OUT" ${PROMPT_ARGS:-} 2>&1 |
        tee "$OUT/gpu-prompts.log" ;;
    host-time)
      PYTHONPATH=$root/python python3 bench/decode_host_time.py 2>&1 | tee "$OUT/gpu-host-time.log" ;;
    envelope) # a subset ($ENVELOPE_SHAPES) writes under $OUT/subset: a whole grid's files in one call stay
      eout=$OUT${ENVELOPE_SHAPES:+/subset}
      mkdir -p "$eout"
      PYTHONPATH=$root/python python3 bench/decode_envelope.py --peers carry/peers --out "$eout" \
        --budget-s "${ENVELOPE_BUDGET_S:-0}" --shapes "${ENVELOPE_SHAPES:-}" ${ENVELOPE_PROFILE:+--profile} 2>&1 |
        tee "$eout/gpu-envelope.log" ;;
    example)
      cmake -S examples/indexer_step -B /tmp/m3idx-example -DCMAKE_PREFIX_PATH="$root" >/dev/null
      cmake --build /tmp/m3idx-example 2>&1 | tail -1
      for device in cuda host; do /tmp/m3idx-example/indexer_step "$device"; done 2>&1 | tee "$OUT/gpu-example.log" ;;
    variants)
      IFS=';' read -r -a variants <<<"${VARIANTS:-}"
      [[ ${#variants[@]} -eq 0 ]] && variants=("")
      {
        read -r -a cshapes <<<"${VARIANT_CHECK_SHAPES:-16:32768:1 16:32768:4 8:32768:1:8 8:32768:4:8 8:32768:4:6}"
        for v in "${variants[@]}"; do for shape in "${cshapes[@]}"; do
          # shellcheck disable=SC2086
          "$m3idx" bench --backend cuda --decode $shape --repeat 1 --check $v 2>&1 |
            grep -E "top-k|rror|score_decode" | sed "s/^/[$v] $shape: /" || true
        done; done
        read -r -a vshapes <<<"${VARIANT_SHAPES:-${decode_shapes[*]} 64:131072:1:8 64:131072:4:8}"
        for shape in "${vshapes[@]}"; do for v in "${variants[@]}"; do
          # shellcheck disable=SC2086
          echo "== variant [$v] $shape"; "$m3idx" bench --backend cuda --decode "$shape" --repeat 25 $v || true
        done; done
      } 2>&1 | tee "$OUT/gpu-variants.log" ;;
    prefill-variants) # prompt steps ($PREFILL_VARIANT_SHAPES) under each `m3idx bench` knob set of $VARIANTS
      IFS=';' read -r -a variants <<<"${VARIANTS:-}"
      [[ ${#variants[@]} -eq 0 ]] && variants=("")
      read -r -a pshapes <<<"${PREFILL_VARIANT_SHAPES:-1:1024:1 1:8192:2 16:4096:1 64:2048:1 64:2048:4 4:32768:1 1:131072:1}"
      for shape in "${pshapes[@]}"; do for v in "${variants[@]}"; do
        # shellcheck disable=SC2086
        echo "== variant [$v] $shape"; "$m3idx" bench --backend cuda --prefill "$shape" --repeat 25 $v || true
      done; done 2>&1 | tee "$OUT/gpu-prefill-variants.log" ;;
    ab) # this archive against carry/old's, prompt steps side by side
      oldroot=/tmp/m3idx-archive-old
      unpack "$oldroot" carry/old
      read -r -a abshapes <<<"${AB_SHAPES:-${prefill_shapes[*]}}"
      for shape in "${abshapes[@]}"; do for side in new old; do
        bin=$m3idx; [[ $side == old ]] && bin=$oldroot/bin/m3idx
        echo "== $side $shape"
        M3IDX_CACHE_DIR=/tmp/m3idx-cache-ab-$side "$bin" bench --backend cuda --prefill "$shape" --repeat 25 || true
      done; done 2>&1 | tee "$OUT/gpu-ab.log" ;;
    profile) # PROFILE_DECODE / PROFILE_PREFILL: the shapes (bench's decode steps and 4 x 32K when unset)
      ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
        --section Occupancy --section SchedulerStats --section WarpStateStats --section LaunchStats
        --metrics "regex:sm__inst_executed_pipe_(alu|fma|fmaheavy|lsu|uniform|xu)\.avg\.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio")
      read -r -a pdecode <<<"${PROFILE_DECODE-${decode_shapes[*]}}"
      read -r -a pprefill <<<"${PROFILE_PREFILL-4:32768:1}"
      {
        for shape in "${pdecode[@]}"; do
          echo "== profile decode $shape"
          "$ncu" --clock-control none --kernel-name regex:score_decode --launch-skip 1 --launch-count 1 "${sections[@]}" \
            "$m3idx" bench --backend cuda --decode "$shape" --repeat 1 --warmup 1
        done
        for shape in "${pprefill[@]}"; do
          echo "== profile prefill $shape"
          "$ncu" --clock-control none --kernel-name regex:'score_prefill|topk_prefill' --launch-skip 2 --launch-count 2 "${sections[@]}" \
            "$m3idx" bench --backend cuda --prefill "$shape" --repeat 1 --warmup 1
        done
      } 2>&1 | tee "$OUT/gpu-profile.log" ;;
    sass)
      ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
      dump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
      for kernel in score_decode score_prefill; do
        "$m3idx" inspect $kernel --target sm_90 --emit ptx >/tmp/$kernel.ptx
        "$ptxas" -arch=sm_90a -O3 /tmp/$kernel.ptx -o /tmp/$kernel.cubin
        "$dump" -sass /tmp/$kernel.cubin >"$OUT/$kernel.sass"
      done ;;
    ceiling) # what plain loads in score_decode's pattern reach: the bound for its 256 x 128K step
      nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
      "$nvcc" -O3 -std=c++17 -arch=sm_90 bench/page_read_ceiling.cu -o /tmp/page-read-ceiling
      for shape in "256 131072" "256 32768" "8 1048576"; do
        # shellcheck disable=SC2086
        /tmp/page-read-ceiling $shape 2>&1 | tee -a "$OUT/gpu-ceiling.log"
      done ;;
    probe) # the exact decode score hand-written (bench/nvfp4_decode_probe.cu): schedules, tiles ahead, decode-free bounds
      nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
      dump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
      "$nvcc" -O3 -std=c++20 -arch=sm_90 -Xptxas -v -I. bench/nvfp4_decode_probe.cu core/Nvfp4.cpp -o /tmp/nvfp4-decode-probe \
        2>&1 | grep -E "Compiling|registers" | tee "$OUT/gpu-probe-ptxas.log"
      "$dump" -sass /tmp/nvfp4-decode-probe >"$OUT/nvfp4-decode-probe.sass"
      for shape in "256 32768 1" "256 131072 1" "8 1048576 1" "64 131072 4"; do
        # shellcheck disable=SC2086
        /tmp/nvfp4-decode-probe $shape 2>&1 | tee -a "$OUT/gpu-probe.log"
      done ;;
    small-step) # the floor of a 1-request step: its dependent chain in one launch, two, two with PDL
      nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
      "$nvcc" -O3 -std=c++17 -arch=sm_90 bench/small_step_probe.cu -o /tmp/small-step-probe
      for tokens in ${SMALL_STEP_TOKENS:-4096 1024}; do
        /tmp/small-step-probe "$tokens" 2>&1 | tee -a "$OUT/gpu-small-step.log"
      done ;;
    cp-group) # issue 39: four processes' DecodeCp groups and their layers' Indexers, checked and timed
      # shellcheck disable=SC2086
      PYTHONPATH=$root/python python3 bench/decode_cp_group.py ${CP_GROUP_ARGS:---kill} 2>&1 | tee -a "$OUT/gpu-cp-group.log" ;;
    ipc) # issue 39's transport questions: one array over four processes' memory, device-side order
      nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
      "$nvcc" -O3 -std=c++17 -arch=sm_90 bench/ipc_push_probe.cu -o /tmp/ipc-push-probe -lcuda
      # shellcheck disable=SC2086
      /tmp/ipc-push-probe ${IPC_PROBE_ARGS:-200 1024 8192 2000} 2>&1 | tee -a "$OUT/gpu-ipc.log" ;;
    fa3) # the prefill score in FlashAttention-3's layout, by hand
      nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
      "$nvcc" -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a bench/prefill_fa3_probe.cu -o /tmp/fa3-probe
      IFS=';' read -r -a fshapes <<<"${FA3_SHAPES:-4 32768 1 64;4 32768 1 16;4 32768 4 64;1 131072 1 64;64 2048 1 16;16 4096 1 32}"
      for shape in "${fshapes[@]}"; do
        # shellcheck disable=SC2086
        stdbuf -oL /tmp/fa3-probe $shape 2>&1 | tee -a "$OUT/gpu-fa3.log"
      done ;;
    wgmma) # the decode loop with wgmma e4m3 next to ours (mma.sync f16), checked against each other
      nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
      "$nvcc" -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a bench/wgmma_probe.cu -o /tmp/wgmma-probe
      for shape in "256 131072 8" "256 131072 32" "256 32768 8"; do
        # shellcheck disable=SC2086
        /tmp/wgmma-probe $shape 2>&1 | tee -a "$OUT/gpu-wgmma.log"
      done ;;
    sanitize) # every kernel config under compute-sanitizer's four tools, on cases full of garbage
      cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      sc=/tmp/m3idx-sanitize-cases
      if [[ ! -d $sc ]]; then
        seed=40
        for q in 1 4 8; do for h in 1 2 4; do
          seed=$((seed + 1))
          "$m3idx" gen --out "$sc/mixed_q${q}_h$h" --seed $seed --heads $h --decodes 3 --decode-query-len $q \
            --context 0:3000 --prefills 2 --prefill-len 1:200 --prefill-context 1:3000 --nan-scales 0.01 \
            --init 1 --local 1 --extra-pages 3 >/dev/null
        done; done
        "$m3idx" gen --out "$sc/mixed_q6_h4" --seed 51 --heads 4 --decodes 3 --decode-query-len 6 \
          --context 0:3000 --prefills 1 --prefill-len 1:200 --prefill-context 1:3000 --nan-scales 0.01 \
          --init 1 --local 1 --extra-pages 3 >/dev/null # 24 columns: a warpgroup staging fewer slots than threads
        "$m3idx" gen --out "$sc/decode_1m_h1" --seed 50 --mode exact --heads 1 --decodes 2 --context 1048576 \
          --prefills 0 --extra-pages 3 >/dev/null # few long rows: the top-k split and its merge
        "$m3idx" gen --out "$sc/decode_64k_h2" --seed 52 --heads 2 --decodes 2 --context 60000:65536 \
          --prefills 0 --nan-scales 0.01 --extra-pages 3 >/dev/null # rows in segments, short enough for all four tools
        "$m3idx" gen --out "$sc/prefill_rows_h2" --seed 53 --heads 2 --decodes 0 --prefills 2 --prefill-len 4000:5000 \
          --prefill-context 4000:6000 --nan-scales 0.01 --extra-pages 3 >/dev/null # topk_prefill programs of several rows, short and long
        "$m3idx" gen --out "$sc/prefill_fused_h2" --seed 54 --heads 2 --decodes 2 --prefills 3 --prefill-len 1:300 \
          --prefill-context 1:2048 --nan-scales 0.01 --extra-pages 3 >/dev/null # score programs that top their own rows
      fi
      for c in "$sc"/*/; do "$m3idx" run "$c" --backend cuda --out /tmp/m3idx-sanitize-warm >/dev/null; done
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
        for c in "$sc"/*/; do
          [[ -n ${SANITIZE_CASES:-} && " $SANITIZE_CASES " != *" $(basename "$c") "* ]] && continue
          # the 1M-token rows: memcheck and initcheck (racecheck and synccheck see the same programs
          # on the shorter rows, and take minutes there)
          [[ $c == *decode_1m* && ($tool == racecheck || $tool == synccheck) ]] && continue
          modes=(backend); [[ $tool == memcheck ]] && modes+=(indexer)
          for mode in "${modes[@]}"; do
            name=$(basename "$c")-$mode
            args=(); [[ $mode == indexer ]] && args=(--indexer --device-tables)
            rc=0
            "$cs" --tool "$tool" --error-exitcode 9 --print-limit 20 "$m3idx" run "$c" --backend cuda \
              --out "/tmp/m3idx-sanitize-out/$tool/$name" "${args[@]}" >"/tmp/m3idx-sanitize-$tool-$name.log" 2>&1 ||
              rc=$?
            "$m3idx" check "$c" "/tmp/m3idx-sanitize-out/$tool/$name" >/dev/null 2>&1 && ok=checked || ok="NOT checked"
            echo "$tool $name: exit $rc, $(grep -hE "(ERROR|RACECHECK) SUMMARY" "/tmp/m3idx-sanitize-$tool-$name.log" | tail -1), output $ok"
          done
        done
      done 2>&1 | tee "$OUT/gpu-sanitize.log" ;;
    *) echo "unknown stage $stage (see the header of $0)" >&2; exit 2 ;;
  esac
done
