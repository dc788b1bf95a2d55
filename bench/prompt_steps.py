"""Prompt steps as an engine runs them (issue 38's benchmark), one process on the GPU: the archive's
Python package next to vLLM's Triton prefill (../shared/peers, carried as carry/peers).

Shapes: fresh prompts P x L in {1 x 1K, 1 x 8K, 1 x 128K, 16 x 4K, 64 x 2K, 4 x 32K}, and chunked
prefill (4 x 512 new rows on 16K of context, 4 x 2K on 64K, 2 x 8K on 128K), each at H = 1, 2, 4.
Per shape:
  kernels   GPU ms of one run() of a ready plan (its launches alone)
  forward   GPU ms of forward() (plan + run in one call: the host work the GPU waits for)
  layer     GPU ms a layer of LAYERS layers, each its own q and kv_cache, run back to back from one
            plan (queued before the timing starts), against `kernels`: the GPU idle between layers.
            The GPU is idle when the first is issued (a synchronize after the flush), so a layer whose
            kernels take less than run()'s host time shows the wait (median of RUNS)
  step      GPU ms of plan() and the LAYERS runs, issued as `layer`, a layer's share (the plan's host
            work uncovered)
  plan us / run us   host wall time of plan() and of one run() (median; run() with the GPU busy),
            run() next to two empty cuLaunchKernel from ctypes timed the same way just before it (a
            prompt step's two launches without m3idx: the host's launch cost drifts within minutes)
  idle      the GPU's idle share of `layer`'s runs from their first kernel's start to their last's
            end: the span less the union of the kernels' intervals (torch.profiler's kernel times,
            the runs issued as `layer` behind a plan queued before). The profiler slows each
            launch, so where a layer's kernels take less than that this overstates the idle (64 x
            2K: 27% under it, the timed layer +1.6%); where it reads 0, the layers ran back to back
            and `layer` against `kernels` is clock and cache drift, not idle
  top-k     the top-k kernel's share of the kernels, decode_keys' included (torch.profiler's CUDA kernel times, 5 runs);
            "fused" where the score kernel tops the rows itself (no topk_prefill launch)
  vLLM      GPU ms of minimax_m3_index_prefill on its own fp8 inputs of the shape
  floor     the causal q.k FLOPs at the f16 tensor-core peak measured in the same process
  check     m3idx's top-k rows against bench/torch_reference.py's (fp32 sums, another order): rows
            equal, and every differing row (up to 64 a shape) a near tie: the blocks in one set only
            score within 1e-5 relative of the row's 16th score, in float64
GPU times: CUDA events, 512 MiB memset before each (L2 flushed), median of RUNS (bench/cuda_timing.py).

Usage: PYTHONPATH=<archive>/python python3 bench/prompt_steps.py --peers carry/peers --out DIR"""
import argparse
import math
import os
import statistics
import sys
import time

import torch

import m3idx
from cuda_timing import time_steps
from graph_decode import empty_launch
import torch_reference as ref

dev = "cuda"
FRESH = [(1, 1024), (1, 8192), (1, 131072), (16, 4096), (64, 2048), (4, 32768)]
CHUNKED = [(4, 512, 16384), (4, 2048, 65536), (2, 8192, 131072)]  # P, new rows, context
LAYERS = 8
KERNELS = ("decode_keys", "score_prefill", "topk_prefill", "score_decode", "topk_decode")


def make_step(P, qlen, ctx, H, seed):
    """m3idx's inputs: P requests of `qlen` new rows on `ctx` tokens of context, own shuffled pages."""
    L = ctx + qlen
    nblk = math.ceil(L / 128)
    g = torch.Generator(device=dev).manual_seed(seed)
    kv = torch.randint(0, 256, (P * nblk, 9216), dtype=torch.uint8, device=dev, generator=g)
    q = torch.randint(0, 256, (P * qlen, H, 128), dtype=torch.uint8, device=dev, generator=g)
    q = torch.where((q & 0x7F) == 0x7F, torch.zeros_like(q), q)  # no NaN queries
    bt = torch.randperm(P * nblk, device=dev, generator=g).int().reshape(P, nblk)
    sl = torch.full((P,), L, dtype=torch.int32)
    qsl = torch.arange(P + 1, dtype=torch.int32) * qlen
    return q, kv, bt.cpu(), sl, qsl


def vllm_inputs(P, qlen, ctx, H, seed):
    L = ctx + qlen
    nb = math.ceil(L / 128)
    g = torch.Generator(device=dev).manual_seed(seed)
    kv = (torch.randn(P * nb, 128, 128, device=dev, generator=g) * 2).to(torch.float8_e4m3fn)
    q = (torch.randn(P * qlen, H, 128, device=dev, generator=g) * 2).to(torch.float8_e4m3fn)
    bt = torch.randperm(P * nb, device=dev, generator=g).to(torch.int32).view(P, nb)
    cu = torch.arange(0, (P + 1) * qlen, qlen, dtype=torch.int32, device=dev)
    sl = torch.full((P,), L, dtype=torch.int32, device=dev)
    pre = torch.full((P,), ctx, dtype=torch.int32, device=dev)
    return q, kv, bt, cu, sl, pre, qlen, L


def near_tie_rows(got, want, q, kv, bt, qlen, ctx, lut, most=64):
    """(rows checked, rows that are not near ties) among the rows where got and want differ."""
    bad = (got != want).any(dim=2).nonzero().tolist()[:most]
    wrong = 0
    for h, t in bad:
        r = t % qlen
        causal = ctx + r + 1
        nblk = (causal + 127) // 128
        keys = ref.decode_keys(kv[bt[t // qlen, :nblk].long().to(dev)], lut).double().reshape(-1, 128)
        dots = keys @ q[t, h].view(torch.float8_e4m3fn).double()
        dots = torch.where(torch.isnan(dots), torch.tensor(float("-inf"), dtype=torch.float64, device=dev), dots)
        dots[causal:] = float("-inf")
        scores = dots.reshape(nblk, 128).amax(-1)
        scores[nblk - 1] = float("inf")  # local_blocks = 1: always in
        kth = scores.sort(descending=True).values[min(16, nblk) - 1]
        differ = set(got[h, t].tolist()) ^ set(want[h, t].tolist())
        tol = 1e-5 * max(1.0, abs(float(kth)))
        wrong += any(abs(float(scores[b]) - float(kth)) > tol for b in differ if b >= 0)
    return len(bad), wrong


def kernel_shares(fn, runs=5):
    """GPU ms a call of each kernel fn() launches, by name (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None)
        if us is None:
            us = e.cuda_time_total
        if us > 0 and e.key in KERNELS:
            out[e.key] = us / 1e3 / runs
    return out


def idle_share(fn):
    """The GPU's idle share of fn()'s kernels' span: 1 - (union of their intervals) / span; and the
    largest gaps (us, the kernels either side), to tell a launch the GPU waited for from noise."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    spans = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA and e.name in KERNELS)
    if not spans:
        return float("nan"), []
    busy, reach, last, gaps = 0.0, spans[0][0], spans[0][2], []
    for start, end, name in spans:
        if start > reach:
            gaps.append((start - reach, last, name))
        if end > reach:
            busy += end - max(start, reach)
            reach, last = end, name
    gaps.sort(reverse=True)
    return (1.0 - busy / (spans[-1][1] - spans[0][0]) if len(spans) > 1 else 0.0), gaps[:3]


def host_us(fn, calls):
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6, times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--heads", default="1,2,4")
    ap.add_argument("--shapes", default="", help="only these, P:qlen:ctx comma-separated")
    args = ap.parse_args()
    sys.path.insert(0, args.peers)
    from vllm_m3_index_topk import minimax_m3_index_prefill

    shapes = [(P, L, 0) for P, L in FRESH] + CHUNKED
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split(":")) for s in args.shapes.split(",")]
    heads = [int(h) for h in args.heads.split(",")]
    a = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
    peak_ms = ref.timed_ms(lambda: a @ b, runs=20)
    f16_tflops = 2 * 8192**3 / peak_ms / 1e9
    del a, b
    print(f"f16 tensor-core peak (torch.matmul 8192^3): {f16_tflops:.0f} TFLOP/s", flush=True)
    lut = torch.tensor(ref.E2M1, device=dev)
    one_launch = empty_launch()
    two_launches = lambda: (one_launch(), one_launch())
    rows = []
    idx = {H: [m3idx.Indexer(num_index_heads=H, init_blocks=0, local_blocks=1, device="cuda")
               for _ in range(LAYERS)] for H in heads}
    for P, qlen, ctx in shapes:
        for H in heads:
            layers = idx[H]
            steps = [make_step(P, qlen, ctx, H, seed=100 * layer + H) for layer in range(LAYERS)]
            q, kv, bt, sl, qsl = steps[0]
            out = torch.empty((H, q.shape[0], 16), dtype=torch.int32, device=dev)
            plan = layers[0].plan(bt, sl, qsl)
            run = lambda: layers[0].run(plan, q, kv, out=out)
            forward = lambda: layers[0].forward(q, kv, bt, sl, qsl, out=out)
            outs = [torch.empty_like(out) for _ in range(LAYERS)]

            def step():  # an engine step: one plan, every layer's indexer runs it
                p = layers[0].plan(bt, sl, qsl)
                for layer in range(LAYERS):
                    layers[layer].run(p, steps[layer][0], steps[layer][1], out=outs[layer])

            def runs_only():  # the step's layers behind a plan queued before the timing
                for layer in range(LAYERS):
                    layers[layer].run(plan, steps[layer][0], steps[layer][1], out=outs[layer])

            vq, vkv, vbt, vcu, vsl, vpre, vmq, vms = vllm_inputs(P, qlen, ctx, H, seed=H)
            vllm = lambda: minimax_m3_index_prefill(vq, vkv, vbt, vcu, vsl, vpre, vmq, vms, 16, 0, 1)
            kernels_ms, forward_ms, vllm_ms = time_steps([run, forward, vllm], args.runs)
            layers_ms, step_ms = time_steps([runs_only, step], args.runs, idle_start=True)
            shares = kernel_shares(run)
            runs_only()  # warm, then the idle between the layers' kernels
            try:
                idle, gaps = idle_share(runs_only)
                print("largest idle gaps: " + ", ".join(f"{g:.1f} us {a} -> {b}" for g, a, b in gaps), flush=True)
            except (AttributeError, RuntimeError) as e:  # a profiler without kernel intervals
                print(f"idle: not measured ({e})", flush=True)
                idle = float("nan")
            plan_us, _ = host_us(lambda: layers[0].plan(bt, sl, qsl), 25)
            torch.cuda.synchronize()
            # run() with the GPU busy: a burst of runs behind a long one, as a step's layers are
            busy = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
            def busy_us(fn):
                times = []
                for _ in range(5):
                    busy.zero_()
                    times += host_us(fn, 20)[1]
                torch.cuda.synchronize()
                return statistics.median(times) * 1e6

            launches_us = busy_us(two_launches)
            run_us = busy_us(run)
            # correctness: forward's rows against the reference, and every layer's run against forward
            got = layers[0].forward(q, kv, bt, sl, qsl).cpu()
            want = ref.indexer_step(ref.decode_step, q, kv, bt.to(dev), sl.to(dev), qsl.to(dev), 0, 4, 0, 1, lut,
                                    chunk=max(1, min(qlen, (1 << 26) // (ctx + qlen) // H))).cpu()
            equal_rows = int((got == want).all(dim=2).sum())
            differing, not_ties = near_tie_rows(got, want, q, kv, bt, qlen, ctx, lut)
            step()
            torch.cuda.synchronize()
            layers_equal = all(torch.equal(outs[layer], layers[0].forward(*steps[layer][:2], bt, sl, qsl))
                               for layer in range(LAYERS))
            flop = 2 * 128 * H * P * sum(ctx + r + 1 for r in range(qlen))
            floor_ms = flop / (f16_tflops * 1e9)
            topk_ms = shares.get("topk_prefill", 0.0)
            r = dict(P=P, qlen=qlen, ctx=ctx, H=H, kernels=kernels_ms, forward=forward_ms, layer=layers_ms / LAYERS,
                     step=step_ms / LAYERS, plan_us=plan_us, run_us=run_us, launches_us=launches_us, vllm=vllm_ms, floor=floor_ms,
                     topk=topk_ms / max(1e-9, sum(shares.values())), fused="topk_prefill" not in shares, idle=idle,
                     rows=H * q.shape[0], equal=equal_rows,
                     differing=differing, not_ties=not_ties, layers_equal=layers_equal)
            rows.append(r)
            print(f"{P} x {qlen} on {ctx}, H={H}: kernels {kernels_ms:.3f} ms (top-k {topk_text(r)}), forward "
                  f"{forward_ms:.3f}, layer {r['layer']:.3f} ({r['layer'] / kernels_ms - 1:+.1%}, idle {idle:.1%}), "
                  f"step {r['step']:.3f} "
                  f"a layer, plan {plan_us:.0f} us, run {run_us:.1f} us (2 empty launches {launches_us:.1f}), vLLM {vllm_ms:.3f} "
                  f"({vllm_ms / r['layer']:.2f}x), floor {floor_ms:.3f} ({kernels_ms / floor_ms:.2f}x), rows equal "
                  f"{equal_rows}/{r['rows']} (of {differing} differing checked, {not_ties} not near ties), layers "
                  f"equal forward {layers_equal}", flush=True)
            del steps, q, kv, out, outs, vq, vkv, plan, busy
            torch.cuda.empty_cache()
    write(rows, f16_tflops, args.out)


def topk_text(r):
    return "fused" if r["fused"] else f"{r['topk']:.0%}"


def write(rows, f16_tflops, out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "prompt_steps.md"), "w") as f:
        f.write(f"f16 tensor-core peak in this process: {f16_tflops:.0f} TFLOP/s\n\n")
        f.write("| step | H | kernels ms | top-k | forward ms | layer ms (vs kernels) | idle | step ms a layer | plan us | "
                "run us (2 empty launches) | vLLM ms | vLLM / m3idx layer | kernels / f16 floor | rows equal | not near ties | "
                "layers = forward |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            name = f"{r['P']} x {r['qlen']}" + (f" on {r['ctx']}" if r["ctx"] else "")
            f.write(f"| {name} | {r['H']} | {r['kernels']:.3f} | {topk_text(r)} | {r['forward']:.3f} | "
                    f"{r['layer']:.3f} ({r['layer'] / r['kernels'] - 1:+.1%}) | {r['idle']:.1%} | {r['step']:.3f} | "
                    f"{r['plan_us']:.0f} | "
                    f"{r['run_us']:.1f} ({r['launches_us']:.1f}) | {r['vllm']:.3f} | {r['vllm'] / r['layer']:.2f}x | "
                    f"{r['kernels'] / r['floor']:.2f}x | {r['equal']}/{r['rows']} | {r['not_ties']}/{r['differing']} | "
                    f"{r['layers_equal']} |\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(12, 4.5))
    labels = [f"{r['P']}x{r['qlen']}" + (f"@{r['ctx'] // 1024}K" if r["ctx"] else "") + f" H{r['H']}" for r in rows]
    x = range(len(rows))
    ax.bar(x, [r["vllm"] / r["layer"] for r in rows], color=["tab:green" if r["vllm"] > r["layer"] else "tab:red"
                                                             for r in rows])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(x), labels, rotation=70, fontsize=7)
    ax.set_ylabel("vLLM ms / m3idx ms (a layer of a planned step)")
    ax.set_title(f"Prompt steps on the {torch.cuda.get_device_name()}: above 1, m3idx is faster")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "prompt_steps.png"), dpi=120)


if __name__ == "__main__":
    main()
