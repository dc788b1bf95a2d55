"""SPEC's indexer in PyTorch, eager and torch.compile: issue 5's comparison points.

--check CASE...: runs case folders (decode, prefill and mixed steps) and compares top-k with
CASE/expected/topk.npy (the golden cases). --bench "R TOKENS H" ...: times a generated decode step
of R requests x 4 rows x TOKENS tokens with H heads, eager and compiled (CUDA events, median of 10
after warm-up); requests are processed in chunks so eager's intermediates fit in memory.
--bench-prefill "P TOKENS H" ...: the same for P prompts of TOKENS tokens (every row new, causal),
in chunks of rows, each dotted only with the blocks its rows can see. --fp8-peak, --f16-peak: dense
8192^3 matmul throughput on the tensor cores (the prefill floor's peak).
"""
import argparse
import json
import math
import os

import numpy as np
import torch

torch.backends.cuda.matmul.allow_tf32 = False  # SPEC: products and sums in fp32
torch.backends.cudnn.allow_tf32 = False

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def decode_keys(pages, lut):
    """uint8 [N, 9216] pages -> fp32 keys [N, 128, 128] (SPEC §2)."""
    data = pages[:, :8192].reshape(-1, 128, 64)
    nib = torch.stack([data & 15, data >> 4], dim=-1).reshape(-1, 128, 128).long()
    scales = pages[:, 8192:].contiguous().view(torch.float8_e4m3fn).float().reshape(-1, 128, 8)
    prod = lut[nib] * scales.repeat_interleave(16, dim=-1)
    return torch.clamp(prod, -448.0, 448.0).to(torch.float8_e4m3fn).float()  # clamp keeps NaN


def decode_step(q, kv, bt, seq_lens, qlen: int, init: int, local: int, lut):
    """Decode rows only. q uint8 [R*qlen, H, 128]; returns top-k int32 [H, R*qlen, 16]."""
    R = bt.shape[0]
    H = q.shape[1]
    nblk_max = bt.shape[1]
    pages = bt.clamp(min=0, max=kv.shape[0] - 1).long()  # invisible entries are masked below
    keys = decode_keys(kv[pages.reshape(-1)], lut).reshape(R, nblk_max * 128, 128)
    qf = q.view(torch.float8_e4m3fn).float().reshape(R, qlen, H, 128)
    dots = torch.einsum("rqhd,rtd->rqht", qf, keys)  # [R, qlen, H, tokens]
    row = torch.arange(qlen, device=q.device)
    causal = (seq_lens.long()[:, None] - qlen + row[None, :] + 1).clamp(min=0)  # [R, qlen]
    tok = torch.arange(nblk_max * 128, device=q.device)
    visible = tok[None, None, :] < causal[:, :, None]
    neg_inf = torch.tensor(float("-inf"), device=q.device)
    dots = torch.where(visible[:, :, None, :] & ~torch.isnan(dots), dots, neg_inf)
    scores = dots.reshape(R, qlen, H, nblk_max, 128).amax(-1)  # fmaxf over tokens; all-NaN -> -inf
    nblk = (causal + 127) // 128  # [R, qlen]
    b = torch.arange(nblk_max, device=q.device)
    nb = nblk[:, :, None, None]
    scores = torch.where(b >= nb - local, torch.tensor(1e29, device=q.device),
                         torch.where(b < init, torch.tensor(1e30, device=q.device), scores))
    # SPEC §5 key: ordered bits of the score (NaN as -inf, -0 as +0) << 32 | block.
    scores = torch.where(scores == 0, torch.zeros_like(scores), scores)
    u = scores.contiguous().view(torch.int32).long() & 0xFFFFFFFF
    ordered = torch.where(u >= 0x80000000, (~u) & 0xFFFFFFFF, u | 0x80000000)
    # Shifted into signed range so int64 comparison orders keys as SPEC's unsigned keys.
    key = ((ordered - 0x80000000) << 32) | b
    none = torch.iinfo(torch.int64).min
    key = torch.where(b < nb, key, torch.full_like(key, none))
    top = torch.topk(key, min(16, nblk_max), dim=-1).values  # [R, qlen, H, k]
    ids = torch.where(top != none, top & 0xFFFFFFFF, torch.full_like(top, -1)).int()
    out = torch.full((R, qlen, H, 16), -1, dtype=torch.int32, device=q.device)
    out[..., : ids.shape[-1]] = ids
    return out.permute(2, 0, 1, 3).reshape(H, R * qlen, 16)


def run_chunked(fn, q, kv, bt, seq_lens, qlen, init, local, lut, chunk):
    outs = []
    for s in range(0, bt.shape[0], chunk):
        e = min(bt.shape[0], s + chunk)
        outs.append(fn(q[s * qlen:e * qlen], kv, bt[s:e], seq_lens[s:e], qlen, init, local, lut))
    return torch.cat(outs, dim=1)


def prefill_rows(fn, q, kv, bt_row, seq_len: int, q_len: int, init, local, lut, chunk, width_step):
    """Top-k int32 [H, q_len, 16] of one prefill request's rows, `chunk` rows at a time. Rows
    [s, e) of a request of q_len rows and seq_len tokens are decode_step's rows of a request of
    e - s rows and seq_len - q_len + e tokens (the same causal lengths), dotted with the blocks
    they can see, rounded up to width_step blocks (a few shapes, so torch.compile compiles a few
    times, not once per chunk)."""
    outs = []
    for s in range(0, q_len, chunk):
        e = min(q_len, s + chunk)
        tokens = seq_len - q_len + e
        width = min(bt_row.shape[0], -(-max(1, math.ceil(tokens / 128)) // width_step) * width_step)
        sl = torch.tensor([tokens], dtype=torch.int32, device=q.device)
        outs.append(fn(q[s:e], kv, bt_row[None, :width], sl, e - s, init, local, lut))
    return torch.cat(outs, dim=1)


def indexer_step(fn, q, kv, bt, seq_lens, qsl, num_decodes, Q, init, local, lut, chunk=1024, width_step=64):
    """A whole step, decode rows then prefill rows: top-k int32 [H, T, 16]."""
    parts = []
    if num_decodes:
        parts.append(fn(q[: num_decodes * Q], kv, bt[:num_decodes], seq_lens[:num_decodes], Q, init, local, lut))
    qsl_host, sl_host = qsl.tolist(), seq_lens.tolist()
    for i in range(num_decodes, bt.shape[0]):
        rows = q[qsl_host[i]:qsl_host[i + 1]]
        parts.append(prefill_rows(fn, rows, kv, bt[i], sl_host[i], rows.shape[0], init, local, lut, chunk,
                                  width_step))
    return torch.cat(parts, dim=1)


def check(case_dirs, dev):
    lut = torch.tensor(E2M1, device=dev)
    ok = True
    for d in case_dirs:
        meta = json.load(open(os.path.join(d, "case.json")))
        load = lambda n: torch.from_numpy(np.load(os.path.join(d, n))).to(dev)
        q, kv, bt, sl = load("q.npy"), load("kv.npy"), load("block_table.npy"), load("seq_lens.npy")
        qsl = load("query_start_loc.npy")
        got = indexer_step(decode_step, q, kv, bt, sl, qsl, meta["num_decodes"], meta["decode_query_len"],
                           meta["init_blocks"], meta["local_blocks"], lut, chunk=7, width_step=1).cpu().numpy()
        want = np.load(os.path.join(d, "expected", "topk.npy"))
        same = np.array_equal(got, want)
        ok &= same
        print(f"{d}: torch top-k {'equals' if same else 'DIFFERS FROM'} the golden expected output")
    return ok


def timed_ms(op, runs=10):
    """Median of `runs` CUDA-event timings of op() after two warm-ups."""
    for _ in range(2):
        op()
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        op()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def random_step(R, rows, L, H, dev):
    """Random bytes for R requests of L tokens each (own pages, shuffled) and `rows` query rows."""
    nblk = math.ceil(L / 128)
    g = torch.Generator(device=dev).manual_seed(7)
    kv = torch.randint(0, 256, (R * nblk, 9216), dtype=torch.uint8, device=dev, generator=g)
    q = torch.randint(0, 256, (rows, H, 128), dtype=torch.uint8, device=dev, generator=g)
    q = torch.where((q & 0x7F) == 0x7F, torch.zeros_like(q), q)  # no NaN queries
    bt = torch.randperm(R * nblk, device=dev, generator=g).int().reshape(R, nblk)
    sl = torch.full((R,), L, dtype=torch.int32, device=dev)
    return q, kv, bt, sl


def bench(shape, dev):
    R, L, H = (int(x) for x in shape.split())
    Q = 4
    q, kv, bt, sl = random_step(R, R * Q, L, H, dev)
    lut = torch.tensor(E2M1, device=dev)
    chunk = max(1, (1 << 22) // L // H)  # at most 4M token-heads at once: eager fits in memory
    compiled = torch.compile(decode_step, dynamic=False)
    results = {}
    for name, fn in (("eager", decode_step), ("compile", compiled)):
        results[name] = timed_ms(lambda: run_chunked(fn, q, kv, bt, sl, Q, 0, 1, lut, chunk))
    gb = R * L * 72 / 1e9
    print(f"torch decode {R} x 4 x {L} tokens, H={H} (chunks of {chunk} requests): "
          f"eager {results['eager']:.3f} ms, torch.compile {results['compile']:.3f} ms "
          f"({gb / results['compile'] * 1e3:.1f} GB/s of index-K)", flush=True)


def bench_prefill(shape, dev):
    P, L, H = (int(x) for x in shape.split())
    q, kv, bt, sl = random_step(P, P * L, L, H, dev)
    qsl = torch.arange(P + 1, dtype=torch.int32, device=dev) * L
    lut = torch.tensor(E2M1, device=dev)
    chunk = max(1, min(L, (1 << 26) // L // H))  # rows at once: at most 64M dots (256 MiB) in flight
    torch._dynamo.config.cache_size_limit = 64  # one compilation per block-width bucket
    compiled = torch.compile(decode_step, dynamic=False)
    results = {}
    for name, fn in (("eager", decode_step), ("compile", compiled)):
        results[name] = timed_ms(lambda: indexer_step(fn, q, kv, bt, sl, qsl, 0, 4, 0, 1, lut, chunk))
    print(f"torch prefill {P} x {L} tokens, H={H} (chunks of {chunk} rows): eager {results['eager']:.3f} ms, "
          f"torch.compile {results['compile']:.3f} ms", flush=True)


def matmul_peak(dev, fp8, n=8192):
    """Dense n^3 matmul throughput with f32 accumulation, the tensor-core peak a prefill floor is
    measured against in the same run: e4m3 x e4m3 (torch._scaled_mm, unit scales), or f16 x f16
    (torch.matmul): Hopper's fp8 sums are not fp32 (bench/RESULTS.md), f16 ones are, so f16 is the
    fastest tensor-core path a kernel with SPEC's fp32 sums can take."""
    if fp8:
        a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
        one = torch.ones((), device=dev)
        op = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        name = f"fp8 e4m3 tensor-core peak (torch._scaled_mm {n}^3)"
    else:
        a = torch.randn(n, n, device=dev, dtype=torch.float16)
        b = torch.randn(n, n, device=dev, dtype=torch.float16)
        op = lambda: a @ b
        name = f"f16 tensor-core peak (torch.matmul {n}^3)"
    ms = timed_ms(op, runs=20)
    print(f"{name}: {2 * n**3 / ms / 1e9:.0f} TFLOP/s ({ms:.3f} ms, median of 20)", flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--check", nargs="*", default=[])
    p.add_argument("--bench", nargs="*", default=[])
    p.add_argument("--bench-prefill", nargs="*", default=[])
    p.add_argument("--fp8-peak", action="store_true")
    p.add_argument("--f16-peak", action="store_true")
    a = p.parse_args()
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    ok = check(a.check, dev) if a.check else True
    for shape in a.bench:
        bench(shape, dev)
    for shape in a.bench_prefill:
        bench_prefill(shape, dev)
    if a.fp8_peak:
        matmul_peak(dev, fp8=True)
    if a.f16_peak:
        matmul_peak(dev, fp8=False)
    raise SystemExit(0 if ok else 1)
