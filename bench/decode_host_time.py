"""decode()'s host time in Python per shape of bench/graph_decode.py, twice over, each next to this
machine's floors measured just before it (PyTorch's smallest op, one and two empty cuLaunchKernel
from ctypes: graph_decode.launch_floors): the H200 host's launch cost drifts by half within minutes,
and a host time means little without the floor of its moment. No step timing, no vLLM.

Usage (on the device, the archive unpacked): PYTHONPATH=<archive>/python python3 bench/decode_host_time.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import m3idx
import graph_decode as gd

gen = torch.Generator(device="cuda").manual_seed(0)
for rep in range(2):
    for R, L, H, Q in gd.SHAPES:
        q, kv, table, lens = gd.m3idx_step(R, L, H, Q, gen)
        idx = m3idx.Indexer(num_index_heads=H, device="cuda", max_num_decodes=R, max_decode_query_len=Q)
        out = torch.empty((H, R * Q, 16), dtype=torch.int32, device="cuda")
        dec = lambda: idx.decode(q, kv, table, lens, out=out)
        dec()
        torch.cuda.synchronize()
        floors = gd.launch_floors()
        print(f"{R:>4} x {L:>8} H{H} Q{Q}: decode() {gd.host_us(dec):.1f} / {gd.burst_us(dec):.1f} us "
              f"(after a synchronize / in bursts of 50); floors {floors}", flush=True)
        idx.close()
        del q, kv, table, lens, out
        torch.cuda.empty_cache()
