"""Decode context parallelism across processes (issue 39) as an engine runs it: four processes on
the one GPU (torch.multiprocessing), each making one m3idx.DecodeCp over a torch.distributed group
(gloo: it only carries the group's name) and two Indexers of one head on "cuda" (two layers)
joining it. Every step's data is made alike on every rank (the same seed): q of the four heads,
each rank taking its own, the NVFP4 cache, block table and seq_lens with padding requests.

Per shape (R requests x L tokens, 4 rows a request), on every rank: a third Indexer without CP
gives the local answer; each layer's CP decode() steps, eager (--steps of them, the layers in
turn) and graph-replayed (both layers captured in one graph, replayed --steps times), must equal
it bit for bit; so must forward() with host metadata, of the decode rows alone and mixed with two
prefill requests (64 new rows on 1000 tokens, 300 on 5000). Then the CP step's and the local
step's graph replays are timed in turn (median of 25, L2 flushed: bench/cuda_timing.py). Four
ranks on one GPU share its bandwidth and its time slices: the CP step here is not four GPUs'.
With --kill, rank 3 then exits and the other ranks' next decode() must fail naming it within
--kill-timeout seconds (their watchdogs release its waits), never hang.

Usage: PYTHONPATH=<archive>/python python3 bench/decode_cp_group.py [--shapes R:L,...] [--steps N] [--kill]"""
import argparse
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import m3idx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_timing import graphed, time_steps  # noqa: E402

WORLD, Q = 4, 4


def make_step(R, L, seed):
    """The step's tensors on the GPU, the same on every rank (q holds all four heads)."""
    g = torch.Generator().manual_seed(seed)
    blocks = (L + 127) // 128
    lens = torch.randint(1, L + 1, (R,), generator=g, dtype=torch.int32)
    if R >= 4:
        lens[torch.randperm(R, generator=g)[: R // 8 + 1]] = 0  # padding requests
    lens[-1] = L
    pages = R * blocks + 3
    table = torch.randperm(pages, generator=g)[: R * blocks].view(R, blocks).to(torch.int32)
    kv = torch.randint(0, 256, (pages, 9216), generator=g, dtype=torch.uint8)
    kv[:, 8192:] = torch.randint(0x30, 0x40, (pages, 1024), generator=g, dtype=torch.uint8)  # E4M3 scales
    q = torch.randint(0, 0x70, (R * Q, WORLD, 128), generator=g, dtype=torch.uint8)  # E4M3, no NaN
    q |= torch.randint(0, 2, q.shape, generator=g, dtype=torch.uint8) << 7
    return q.cuda(), kv.cuda(), table.cuda(), lens.cuda()


def forward_metadata(R, L, lens, table, kv_pages, seed):
    """Host metadata of forward(): the R decode requests (seq_len >= 4: forward() has no padding
    requests) and two prefill requests after them, with the prefill rows' q (all four heads)."""
    g = torch.Generator().manual_seed(seed)
    plen, pseq = [64, 300], [1000, 5000]
    pblocks = (max(pseq) + 127) // 128
    M = max(table.shape[1], pblocks)
    t = torch.zeros(R + 2, M, dtype=torch.int32)
    t[:R, :table.shape[1]] = table.cpu()
    t[R:, :pblocks] = torch.randint(0, kv_pages, (2, pblocks), generator=g, dtype=torch.int32)
    seq = torch.cat([lens.cpu().clamp(min=Q), torch.tensor(pseq, dtype=torch.int32)])
    qsl = torch.zeros(R + 3, dtype=torch.int32)
    qsl[1:] = torch.cumsum(torch.tensor([Q] * R + plen, dtype=torch.int32), 0)
    qp = torch.randint(0, 0x70, (sum(plen), WORLD, 128), generator=g, dtype=torch.uint8)
    return t, seq, qsl, qp.cuda()


def rank_main(rank, args, port):
    torch.cuda.set_device(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    say = lambda *a: print(f"rank {rank}:", *a, flush=True)  # noqa: E731
    try:
        local = m3idx.Indexer(num_index_heads=1, device="cuda")
        t = time.perf_counter()
        group = m3idx.DecodeCp.init(1 << 20)
        layers = [m3idx.Indexer(num_index_heads=1, device="cuda", decode_cp=group) for _ in range(2)]
        cp = layers[0]
        say(f"joined {group.name} in {time.perf_counter() - t:.2f} s (two layers)")
        for i, shape in enumerate(args.shapes.split(",")):
            R, L = (int(x) for x in shape.split(":"))
            q, kv, table, lens = make_step(R, L, 1000 + i)
            qh = q[:, rank:rank + 1, :].contiguous()
            want = local.decode(qh, kv, table, lens).clone()
            wrong = 0
            for s in range(args.steps):
                layer = layers[s % 2]
                got = layer.decode(qh, kv, table, lens)
                wrong += not torch.equal(got, want)
                if not layer.decode_cp_active():
                    raise RuntimeError("a step of 4 rows was not scored by the group")
            outs = [torch.empty_like(want) for _ in layers]
            out_local = torch.empty_like(want)

            def both_layers():
                for layer, out in zip(layers, outs):
                    layer.decode(qh, kv, table, lens, out=out)

            g_both = graphed(both_layers)
            g_cp = graphed(lambda: cp.decode(qh, kv, table, lens, out=outs[0]))
            g_local = graphed(lambda: local.decode(qh, kv, table, lens, out=out_local))
            replays_wrong = 0
            for _ in range(args.steps):
                for out in outs:
                    out.fill_(-7)
                g_both.replay()
                torch.cuda.synchronize()
                replays_wrong += not all(torch.equal(out, want) for out in outs)
            ms_cp, ms_local = time_steps([g_cp.replay, g_local.replay])
            replays_wrong += not torch.equal(outs[0], want)
            # forward() with host metadata: the decode rows alone, then mixed with prefill rows
            ft, fseq, fqsl, qp = forward_metadata(R, L, lens, table, kv.shape[0], 2000 + i)
            fwd_wrong = []
            for name, rows, reqs in (("decode", qh, R), ("mixed", torch.cat([q, qp])[:, rank:rank + 1].contiguous(), R + 2)):
                args_f = (rows, kv, ft[:reqs], fseq[:reqs], fqsl[:reqs + 1])
                want_f = local.forward(*args_f, num_decodes=R).clone()
                got_f = layers[1].forward(*args_f, num_decodes=R)
                if not layers[1].decode_cp_active():
                    raise RuntimeError(f"forward() ({name}) was not scored by the group")
                if not torch.equal(got_f, want_f):
                    fwd_wrong.append(name)
            for layer in layers:
                layer.check()
            say(f"R={R} L={L}: eager {args.steps - wrong}/{args.steps} equal, graph (two layers) "
                f"{args.steps + 1 - replays_wrong}/{args.steps + 1} equal, forward decode+mixed "
                f"{'equal' if not fwd_wrong else 'DIFFER: ' + ','.join(fwd_wrong)}; "
                f"graph replay CP {ms_cp * 1000:.1f} us, local {ms_local * 1000:.1f} us")
            del g_cp, g_local, g_both, q, kv, table, lens
            torch.cuda.empty_cache()
        if args.kill:
            dist.barrier()
            if rank == 3:
                say("exits")
                os._exit(0)
            t = time.perf_counter()
            q, kv, table, lens = make_step(8, 4096, 7)
            qh = q[:, rank:rank + 1, :].contiguous()
            while True:
                try:
                    cp.decode(qh, kv, table, lens)
                    torch.cuda.synchronize()
                except m3idx.Error as e:
                    say(f"after rank 3 left: decode() failed in {time.perf_counter() - t:.2f} s "
                        f"(departed_rank {group.departed_rank()}): {e}")
                    break
                if time.perf_counter() - t > args.kill_timeout:
                    say(f"after rank 3 left: still no error after {args.kill_timeout} s")
                    break
            os._exit(0)  # the gloo group has lost a rank: no orderly teardown
    except Exception:
        say("FAILED\n" + traceback.format_exc())
        os._exit(1)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="1:4096,32:65536,256:16384,8:1048576")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--kill", action="store_true")
    ap.add_argument("--kill-timeout", type=float, default=10.0)
    args = ap.parse_args()
    port = 29500 + os.getpid() % 1000
    mp.spawn(rank_main, args=(args, port), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main()
