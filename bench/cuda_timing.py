"""GPU timing helpers of the bench/ Python programs (graph_decode.py, decode_envelope.py), per
bench/README's method: CUDA events around one call, a 512 MiB memset before each (L2 flushed),
the median of many; and a callable captured into a CUDA graph after two warm-up calls on a side
stream (PyTorch's recipe for capture)."""
import statistics

import torch


def time_step(fn, runs=25, dev="cuda"):
    """Median ms of fn() over `runs` calls, each after an L2 flush, by CUDA events."""
    return time_steps([fn], runs, dev)[0]


def time_steps(fns, runs=25, dev="cuda", idle_start=False):
    """Median ms of each of fns over `runs` calls, each after an L2 flush, by CUDA events, in turn
    (one call of each per round), so that none of them alone is timed in the GPU's state after what
    ran before (the first graph timed after a reference computation ran up to 18 us slower than
    when timed later: bench/RESULTS.md, 2026-12-04 (3)). With `idle_start` the host waits for the
    flush before each call, so a call whose host work outlasts its GPU work shows the GPU's wait
    (otherwise the flush gives the host a head start)."""
    flush = torch.empty(512 << 20, dtype=torch.uint8, device=dev)
    for fn in fns:
        for _ in range(3):
            fn()
    times = [[] for _ in fns]
    for _ in range(runs):
        for fn, t in zip(fns, times):
            flush.zero_()
            if idle_start:
                torch.cuda.synchronize()
            a, b = torch.cuda.Event(True), torch.cuda.Event(True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            t.append(a.elapsed_time(b))
    return [statistics.median(t) for t in times]


def graphed(fn):
    """A CUDA graph of fn(), captured after two warm-up calls on a side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g
