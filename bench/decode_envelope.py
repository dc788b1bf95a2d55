"""The decode serving envelope (issue 40's benchmark), one process on the H200: m3idx's decode()
graph-replayed at capacity max_model_len = 1M and at capacity = the step's L, next to vLLM's Triton
path (../shared/peers, carried as carry/peers) graph-replayed with max_seq_len 1M, over

  R in {1, 2, 8, 32, 128, 256} requests x L in {2K, 8K, 32K, 128K, 512K} tokens (R x L <= 256 x 512K)
  x H in {1, 4} heads, 4 rows a request; 8 x 1M and 1 x 4K; 1, 2 and 8 rows on a subset.

Every m3idx output (the capacity-1M replay and the capacity-L one) is compared bit for bit with
bench/torch_reference.py's decode_step (SPEC in PyTorch, an independent implementation) on data
whose fp32 sums are exact (e4m3 queries in {0, +-0.5, +-1, +-2}, NVFP4 scales 1.0), so the top-k is
unique and both must agree exactly. Each time is the median of --runs graph replays, a 512 MiB
memset before each (L2 flushed), CUDA events around the replay; the copy bandwidth is measured in
the same process. Writes --out/envelope.md (the table) and --out/envelope.png (vLLM / m3idx over
R x L per H, capacity 1M).

Usage: PYTHONPATH=<archive>/python python3 bench/decode_envelope.py --peers carry/peers --out $OUT"""
import argparse
import os
import statistics
import sys
import time

import torch

import m3idx
from cuda_timing import graphed, time_step, time_steps

dev = "cuda"
ONE_M = 1 << 20
RS = [1, 2, 8, 32, 128, 256]
LS = [2048, 8192, 32768, 131072, 524288]


def grid():
    shapes = [(R, L, H, 4) for H in (1, 4) for R in RS for L in LS if R * L <= 256 * 524288]
    # 8 x 1M and 64 x 128K H=4: large-step bandwidth targets; 1 x 4K: the small-step target
    shapes += [(8, ONE_M, 1, 4), (8, ONE_M, 4, 4), (64, 131072, 4, 4), (1, 4096, 1, 4)]
    shapes += [(R, L, H, Q) for Q in (1, 2, 8) for H in (1, 4) for R in (1, 32, 256) for L in (8192, 131072)]
    return shapes


def copy_gbs(nbytes=4 << 30):
    """Read + write GB/s of an elementwise kernel over float32 (torch's vectorized loads and stores):
    m3idx bench's copy (bench/support/DeviceTiming.cpp) is a kernel too; a cudaMemcpy device to
    device (uint8 copy_) reached only 2.7 TB/s on the H200 (2026-12-03)."""
    x = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
    y = torch.empty_like(x)
    g = graphed(lambda: torch.neg(x, out=y))
    ms = time_step(g.replay, 20)
    return 2 * nbytes / ms / 1e6


def launch_floors(runs):
    """What a graph of 1, 2 and 3 one-element kernels costs to replay: the floor a step of that
    many launches stands on."""
    x = torch.zeros(1, device=dev)
    out = []
    for n in (1, 2, 3):
        g = graphed(lambda: [x.add_(1) for _ in range(n)])
        out.append((n, time_step(g.replay, runs)))
    return out


def exact_step(R, L, H, Q, gen):
    """A step whose scores are exact fp32 sums: NVFP4 scales 1.0 (0x38), any nibbles; e4m3 query
    bytes of 0, +-0.5, +-1, +-2. Every page its own, in a random order."""
    nb = (L + 127) // 128
    pages = R * nb
    kv = torch.randint(0, 256, (pages, 9216), dtype=torch.uint8, device=dev, generator=gen)
    kv[:, 8192:] = 0x38
    codes = torch.tensor([0x00, 0x30, 0x38, 0x40, 0xB0, 0xB8, 0xC0], dtype=torch.uint8, device=dev)
    q = codes[torch.randint(0, len(codes), (R * Q, H, 128), device=dev, generator=gen)]
    table = torch.randperm(pages, device=dev, generator=gen).to(torch.int32).view(R, nb)
    lens = torch.full((R,), L, dtype=torch.int32, device=dev)
    return q, kv, table, lens


def reference_topk(ref, q, kv, table, lens, Q, lut):
    """SPEC's top-k by bench/torch_reference.py, in chunks of requests that fit in memory."""
    tokens_per_chunk = 1 << 22
    chunk = max(1, tokens_per_chunk // (table.shape[1] * 128))
    return ref.run_chunked(ref.decode_step, q, kv, table, lens, Q, 0, 1, lut, chunk)


def kernel_us(fn, runs=10):
    """Mean GPU time per call of each kernel (and memset) fn() runs (torch.profiler, which sees a
    graph's kernels), each call after an L2 flush: where a step's time goes. Also, as "idle", the
    median time per call that no kernel of fn() ran between the flush's end and fn()'s last kernel's
    end (launch latency and the gaps between kernels)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    flush = torch.empty(512 << 20, dtype=torch.uint8, device=dev)
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    out, calls = {}, []
    events = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start),
                    key=lambda e: e.time_range.start)
    for e in events:  # every kernel and memset but the flush's fill
        if "FillFunctor" in e.name:
            calls.append([e.time_range.end, 0.0, None])
            continue
        out[e.name[:48]] = out.get(e.name[:48], 0.0) + (e.time_range.end - e.time_range.start) / runs
        if calls:
            calls[-1][1] += e.time_range.end - e.time_range.start
            calls[-1][2] = e.time_range.end
    idle = [end - start - busy for start, busy, end in calls if end is not None]
    if idle:
        out["idle"] = statistics.median(idle)
    return out


def m3idx_graph(R, H, Q, capacity, q, kv, table, lens):
    idx = m3idx.Indexer(num_index_heads=H, init_blocks=0, local_blocks=1, device="cuda",
                        max_num_decodes=R, max_decode_query_len=Q, max_model_len=capacity)
    out = torch.empty((H, R * Q, 16), dtype=torch.int32, device=dev)
    g = graphed(lambda: idx.decode(q, kv, table, lens, out=out))
    return idx, out, g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default="carry/peers")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N shapes (a quick look)")
    ap.add_argument("--shapes", default="", help="only these shapes, R:L:H:Q comma-separated (a quick look)")
    ap.add_argument("--profile", action="store_true",
                    help="also print each kernel's GPU time per step (torch.profiler) at both capacities and vLLM's")
    ap.add_argument("--budget-s", type=float, default=0,
                    help="start no shape after this many seconds (a device call's limit); 0: none")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.peers))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from vllm_m3_index_topk import minimax_m3_index_decode
    import run_vllm_peer as peer
    import torch_reference as ref

    lut = torch.tensor(ref.E2M1, device=dev)
    print("gpu", torch.cuda.get_device_name(), "torch", torch.__version__, "m3idx", m3idx.library_path(), flush=True)
    copy = copy_gbs()
    print(f"copy bandwidth {copy:.0f} GB/s (read + write, a 4 GiB elementwise kernel, graph-replayed)", flush=True)
    floors = launch_floors(args.runs)
    print("graph-replay floors (ms, L2 flushed): " + ", ".join(f"{n} tiny kernel(s) {ms:.4f}" for n, ms in floors),
          flush=True)
    gen = torch.Generator(device=dev).manual_seed(0)
    rows = []
    header = (f"{'R':>4} {'L':>8} {'H':>2} {'Q':>2} | {'m3idx 1M':>9} {'m3idx L':>8} {'cap cost':>8} "
              f"{'%copy':>6} | {'vLLM 1M':>8} | {'vLLM/m3idx':>10} | checked")
    print(header, flush=True)
    shapes = grid()[: args.limit or None]
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split(":")) for s in args.shapes.split(",")]
    failures, skipped, start = 0, [], time.monotonic()
    for R, L, H, Q in shapes:
        if args.budget_s and time.monotonic() - start > args.budget_s:
            skipped.append((R, L, H, Q))
            continue
        q, kv, table, lens = exact_step(R, L, H, Q, gen)
        want = reference_topk(ref, q, kv, table, lens, Q, lut)
        times, ok, kernels = {}, True, {}
        graphs = {}
        for name, capacity in (("1M", ONE_M), ("L", L)):
            idx, out, g = m3idx_graph(R, H, Q, capacity, q, kv, table, lens)
            out.fill_(-7)
            g.replay()
            torch.cuda.synchronize()
            same = torch.equal(out, want)
            idx.check()
            ok &= same
            graphs[name] = (idx, g, out)  # out stays alive while its graph may replay
        # the two capacities timed in turn (time_steps): the cost of capacity is their ratio
        times.update(zip(graphs, time_steps([g.replay for _, g, _ in graphs.values()], args.runs)))
        for name, (idx, g, _) in graphs.items():
            if args.profile:
                kernels[name] = kernel_us(g.replay)
            idx.close()
        del graphs, g
        del q, kv, table, lens, want
        torch.cuda.empty_cache()
        try:  # the peer builds its fp8 cache through f32: 64 GiB for 256 x 512K, past an 80 GB card
            vq, vkv, vbt, vsl = peer.make(R, L, H)
            if Q != peer.Q:
                vq = (torch.randn(R * Q, H, 128, device=dev) * 2).to(torch.float8_e4m3fn)
            vg = graphed(lambda: minimax_m3_index_decode(vq, vkv, vbt, vsl, ONE_M, 16, 0, 1, H, Q, Q))
            v_ms = time_step(vg.replay, args.runs)
            if args.profile:
                kernels["vLLM"] = kernel_us(vg.replay)
            del vg, vq, vkv, vbt, vsl
        except torch.OutOfMemoryError:
            v_ms = float("nan")  # printed as nan: vLLM's path did not fit this card
            vq = vkv = vbt = vsl = vg = None
        torch.cuda.empty_cache()
        pct = 100 * (R * L * 72 / times["1M"] / 1e6) / copy
        cost = times["1M"] / times["L"] - 1
        row = dict(R=R, L=L, H=H, Q=Q, m1=times["1M"], mL=times["L"], cost=cost, pct=pct, v=v_ms, ratio=v_ms / times["1M"],
                   ok=ok)
        rows.append(row)
        failures += not ok
        print(f"{R:>4} {L:>8} {H:>2} {Q:>2} | {times['1M']:>9.4f} {times['L']:>8.4f} {100 * cost:>7.1f}% "
              f"{pct:>6.1f} | {v_ms:>8.4f} | {v_ms / times['1M']:>9.2f}x | {'ok' if ok else 'DIFFERS'}", flush=True)
        for name, ks in kernels.items():
            print(f"    kernels, {name}: " + ", ".join(f"{k} {us:.2f} us" for k, us in sorted(ks.items())), flush=True)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "envelope.md"), "w") as f:
        f.write(f"copy bandwidth {copy:.0f} GB/s; a graph of 1, 2, 3 tiny kernels: "
                + ", ".join(f"{ms * 1000:.1f}" for _, ms in floors) + " us; "
                f"ms per graph-replayed step (median of {args.runs}, L2 flushed)\n\n")
        f.write("| R | L | H | rows | m3idx, capacity 1M | m3idx, capacity L | capacity cost | % of copy | "
                "vLLM, graph, 1M | vLLM / m3idx | checked |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['R']} | {r['L']} | {r['H']} | {r['Q']} | {r['m1']:.4f} | {r['mL']:.4f} | "
                    f"{100 * r['cost']:+.1f}% | {r['pct']:.1f} | {r['v']:.4f} | {r['ratio']:.2f}x | "
                    f"{'ok' if r['ok'] else 'DIFFERS'} |\n")
        if skipped:
            f.write(f"\nnot run (past --budget-s {args.budget_s:g}): {skipped}\n")
    plot(rows, os.path.join(args.out, "envelope.png"))
    print(f"{len(rows)} shapes, {failures} differing from the reference, {len(skipped)} not run (budget); "
          "wrote envelope.md and envelope.png")
    sys.exit(1 if failures else 0)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    for ax, H in zip(axes, (1, 4)):
        grid_ = np.full((len(RS), len(LS)), np.nan)
        for r in rows:
            if r["H"] == H and r["Q"] == 4 and r["L"] in LS and r["R"] in RS:  # --shapes may hold others
                grid_[RS.index(r["R"]), LS.index(r["L"])] = r["ratio"]
        im = ax.imshow(grid_, cmap="RdYlGn", vmin=0.4, vmax=1.6, origin="lower", aspect="auto")
        for i in range(len(RS)):
            for j in range(len(LS)):
                if not np.isnan(grid_[i, j]):
                    ax.text(j, i, f"{grid_[i, j]:.2f}", ha="center", va="center", fontsize=9)
        ax.set_xticks(range(len(LS)), [f"{L // 1024}K" for L in LS])
        ax.set_yticks(range(len(RS)), [str(R) for R in RS])
        ax.set_xlabel("tokens per request (L)")
        ax.set_ylabel("requests (R)")
        ax.set_title(f"H={H}, 4 rows a request")
    fig.suptitle("vLLM graph time / m3idx graph time (both at capacity 1M; > 1: m3idx faster)")
    fig.colorbar(im, ax=axes, shrink=0.8)
    fig.savefig(path, dpi=110, bbox_inches="tight")


if __name__ == "__main__":
    main()
