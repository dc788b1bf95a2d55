"""Decode steps inside an engine (issue 24's benchmark), one process on the H200, the archive's Python
package next to vLLM's Triton path (../shared/peers, carried as carry/peers):

  m3idx forward()   host metadata: seq_lens and the block table read, checked and planned on the host,
                    uploaded in one copy, then the kernels (what an engine pays per step without graphs)
  m3idx decode()    device metadata, plain launches (grids from shapes: max_model_len = 1M)
  m3idx graph       decode() captured once by torch.cuda.graph and replayed
  vLLM plain/graph  minimax_m3_index_decode, plain and replayed (its fp8 index-K, 128 B/token)
  host us/call      wall time of one Python forward() / decode() call (median of 200, each after
                    a synchronize; the same tensors each call, and a new q object each call as every
                    layer has its own), its parts (packing all five tensors anew, the stream query,
                    the C call), and the mean in bursts of 50 back-to-back calls
  floors            the same two host times of what this machine's driver and PyTorch cost before
                    any m3idx work: PyTorch's smallest eager op (x.add_(1)), and one and two
                    cuLaunchKernel calls (a decode step's launches) of an empty kernel with 45
                    parameters (as many as score_decode's) from Python through ctypes

Each step time is the median of 25 with a 512 MiB memset before each (L2 flushed), CUDA events
around the step, as METHOD.md and run_vllm_peer.py do. The copy bandwidth is measured in the same
process. Shapes: bench/'s four decode steps (4 rows a request) and 64 x 128K with 8 rows (H 1 and 4).

Usage: PYTHONPATH=<archive>/python python3 bench/graph_decode.py --peers carry/peers"""
import argparse
import ctypes
import functools
import os
import statistics
import sys
import time

import torch

import m3idx
from cuda_timing import graphed, time_step

SHAPES = [(256, 32768, 1, 4), (256, 131072, 1, 4), (64, 131072, 4, 4), (8, 1 << 20, 1, 4),
          (64, 131072, 1, 8), (64, 131072, 4, 8)]
dev = "cuda"


def host_us(fn, calls=200):
    """Median wall time of one call, each issued onto an idle GPU (no call waits for a full queue)."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def burst_us(fn, calls=50, bursts=9):
    """Mean wall time of one call in a burst of back-to-back calls (the GPU working behind them),
    median over bursts."""
    means = []
    for _ in range(bursts):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        means.append((time.perf_counter() - t) / calls)
    torch.cuda.synchronize()
    return statistics.median(means) * 1e6


def host_breakdown(idx, q, kv, table, lens, out):
    """Where one decode() call's host time goes: Python packing, the stream query, the C call."""
    idx.decode(q, kv, table, lens, out=out)  # this thread's argument buffer made, the stream cached
    args = idx._per_thread.args

    def packing():  # every tensor packed anew
        args.packed[:] = [None] * len(args.packed)
        return [idx._pack_torch(args, i, a, (a.data_ptr(), a.shape, a.stride(), a.dtype))
                for i, a in enumerate((q, kv, table, lens, out))]
    packing()
    idx.decode(q, kv, table, lens, out=out)
    raw, stream = args.raw, args.stream_arg
    c_call = lambda: idx._decode_untyped(idx._handle, raw[0], raw[1], raw[2], raw[3], stream, raw[4], None, None)
    views = [q.view(q.shape), q.view(q.shape)]  # another q object each call, as each layer has its own
    turn = [0]

    def new_q():
        turn[0] ^= 1
        return idx.decode(views[turn[0]], kv, table, lens, out=out)
    parts = {"decode()": lambda: idx.decode(q, kv, table, lens, out=out), "decode() new q": new_q, "packing": packing,
             "stream": idx._stream, "C call": c_call,
             "decode() out=None": lambda: idx.decode(q, kv, table, lens)}
    return "  ".join(f"{k} {host_us(f):.1f}" for k, f in parts.items()) + \
        f"  | in bursts of 50: decode() {burst_us(parts['decode()']):.1f} C call {burst_us(c_call):.1f}"


@functools.cache
def empty_launch():
    """One cuLaunchKernel of an empty 45-parameter kernel from ctypes (its module loaded once)."""
    cuda = ctypes.CDLL("libcuda.so.1")
    n = 45
    params = ", ".join(f".param .u64 p{i}" for i in range(n))
    ptx = f".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry empty({params})\n{{\n ret;\n}}\n"
    torch.zeros(1, device=dev)  # the primary context current, as m3idx finds it
    module, fn = ctypes.c_void_p(), ctypes.c_void_p()
    assert cuda.cuModuleLoadData(ctypes.byref(module), ptx.encode()) == 0, "cuModuleLoadData"
    assert cuda.cuModuleGetFunction(ctypes.byref(fn), module, b"empty") == 0, "cuModuleGetFunction"
    values = (ctypes.c_uint64 * n)()
    args = (ctypes.c_void_p * n)(*[ctypes.addressof(values) + 8 * i for i in range(n)])
    launch = cuda.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    stream = torch.cuda.current_stream().cuda_stream
    keep = (module, values, args)  # the parameters' storage lives as long as the launcher
    return lambda: launch(fn, 1, 1, 1, 32, 1, 1, 0, stream, keep[2], None)


def launch_floors():
    """Host us (after a synchronize / in bursts) of PyTorch's smallest op and of empty launches."""
    x = torch.zeros(1, device=dev)
    one = empty_launch()
    two = lambda: (one(), one())
    parts = {"torch x.add_(1)": lambda: x.add_(1), "1 empty launch": one, "2 empty launches": two}
    return "  ".join(f"{k} {host_us(f):.1f} / {burst_us(f):.1f}" for k, f in parts.items())


def copy_gbs(nbytes):
    x = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    y = torch.empty_like(x)
    return 2 * nbytes / time_step(lambda: y.copy_(x), 20) / 1e6


def m3idx_step(R, L, H, Q, gen):
    nb = (L + 127) // 128
    pages = R * nb
    kv = torch.randint(0, 256, (pages, 9216), dtype=torch.uint8, device=dev, generator=gen)
    q = torch.randint(0, 120, (R * Q, H, 128), dtype=torch.uint8, device=dev, generator=gen)
    table = torch.randperm(pages, device=dev, generator=gen).to(torch.int32).view(R, nb)
    lens = torch.full((R,), L, dtype=torch.int32, device=dev)
    return q, kv, table, lens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default="carry/peers")
    ap.add_argument("--runs", type=int, default=25)
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.peers))
    from vllm_m3_index_topk import minimax_m3_index_decode
    import run_vllm_peer as peer

    print("gpu", torch.cuda.get_device_name(), "torch", torch.__version__, "m3idx", m3idx.library_path())
    print("floors, host us (after a synchronize / in bursts of 50):", launch_floors(), flush=True)
    gen = torch.Generator(device=dev).manual_seed(0)
    print(f"{'R':>4} {'L':>8} {'H':>2} {'Q':>2} | {'fwd ms':>7} {'dec ms':>7} {'graph ms':>8} "
          f"{'%copy':>6} | {'vllm ms':>7} {'vllm graph':>10} | {'fwd us':>6} {'dec us':>6} | graph/vllm-graph")
    for R, L, H, Q in SHAPES:
        q, kv, table, lens = m3idx_step(R, L, H, Q, gen)
        table_host, lens_host = table.cpu(), lens.cpu()
        qsl = torch.arange(0, (R + 1) * Q, Q, dtype=torch.int32)
        idx = m3idx.Indexer(num_index_heads=H, device="cuda", max_num_decodes=max(R, 1),
                            max_decode_query_len=Q, max_model_len=1 << 20)
        out = torch.empty((H, R * Q, 16), dtype=torch.int32, device=dev)
        fwd = lambda: idx.forward(q, kv, table_host, lens_host, qsl, num_decodes=R, decode_query_len=Q, out=out)
        dec = lambda: idx.decode(q, kv, table, lens, out=out)
        fwd()
        want = out.clone()
        dec()
        assert torch.equal(out, want), "decode() != forward()"
        g = graphed(dec)
        out.fill_(-7)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, want), "graph replay != forward()"
        idx.check()
        fwd_ms, dec_ms, graph_ms = time_step(fwd, args.runs), time_step(dec, args.runs), time_step(g.replay, args.runs)
        fwd_us, dec_us = host_us(fwd), host_us(dec)
        breakdown = host_breakdown(idx, q, kv, table, lens, out)
        cp = copy_gbs(max(R * L * 72, 256 << 20))
        pct = 100 * (R * L * 72 / graph_ms / 1e6) / cp
        del g
        idx.close()
        del q, kv, table, lens, out
        torch.cuda.empty_cache()

        # vLLM's path on its own fp8 data (128 B/token), max_decode_query_len = Q.
        vq, vkv, vbt, vsl = peer.make(R, L, H)
        if Q != peer.Q:
            vq = (torch.randn(R * Q, H, 128, device=dev) * 2).to(torch.float8_e4m3fn)
        vfn = lambda: minimax_m3_index_decode(vq, vkv, vbt, vsl, L, 16, 0, 1, H, Q, Q)
        v_ms = time_step(vfn, args.runs)
        vg = graphed(vfn)
        vg_ms = time_step(vg.replay, args.runs)
        v_us = host_us(vfn)
        del vg, vq, vkv, vbt, vsl
        torch.cuda.empty_cache()
        print(f"{R:>4} {L:>8} {H:>2} {Q:>2} | {fwd_ms:>7.3f} {dec_ms:>7.3f} {graph_ms:>8.3f} {pct:>6.1f} | "
              f"{v_ms:>7.3f} {vg_ms:>10.3f} | {fwd_us:>6.1f} {dec_us:>6.1f} | {vg_ms / graph_ms:.2f}x", flush=True)
        print(f"      host us: {breakdown}  vLLM call {v_us:.1f}", flush=True)


if __name__ == "__main__":
    main()
