#!/usr/bin/env python3
"""Issue 5's benchmark table from one device call's logs (bench/gpu.sh table): per decode step our
time and its split, index-K GB/s and % of the copy measured beside it, PyTorch eager and
torch.compile times and our speed-up over each; per prefill step our time against its floor, the
larger of its byte time and its fp8 tensor-core time at the fp8 peak measured in the same call
(and, beside it, the f16 floor: the fastest tensor-core path with fp32 sums), its GB/s and % of the
copy, and the PyTorch times and speed-ups. Each target is marked met or not. Usage: table.py
LOG_DIR (holding gpu-bench.log and gpu-prefill.log from `m3idx bench`, torch-bench.log, and
peers.log / peers-torch.log from ../shared/peers/run_vllm_peer.py / torch_indexer.py when they ran;
the decode PyTorch times are torch_indexer.py's then, the fastest PyTorch version known)."""
import re
import sys
from pathlib import Path

NUM = r"([0-9.]+)"


def bench_blocks(path):
    """`m3idx bench --decode/--prefill` output, one dict per step: kind, shape, ms, GB/s, per-kernel
    split, copy GB/s and % of it (decode), TFLOP/s and TFLOP (prefill)."""
    blocks, b = [], None
    for line in Path(path).read_text().splitlines():
        if m := re.match(r"case (decode|prefill) (\d+):(\d+):(\d+):", line):
            b = dict(kind=m[1], key=(int(m[2]), int(m[3]), int(m[4])), split={})
            blocks.append(b)
        elif b is None:
            continue
        elif m := re.match(rf"backend \w+ .*: median {NUM} ms/step .*?, {NUM} GB/s of index-K", line):
            b.update(ms=float(m[1]), gbs=float(m[2]))
        elif m := re.match(rf"\s+device copy {NUM} GB/s .* at {NUM}% of it", line):
            b.update(copy=float(m[1]), pct=float(m[2]))
        elif m := re.match(rf"\s+{NUM} TFLOP/s of q.k products \({NUM} TFLOP\)", line):
            b.update(tflops=float(m[1]), work=float(m[2]))
        elif m := re.match(rf"\s+(\w+)\s+{NUM} ms \(median", line):
            b["split"][m[1]] = float(m[2])
    return blocks


def vllm_rows(log_dir):
    """run_vllm_peer.py's decode rows (R L H GB ms graph_ms ...) and prefill rows (P L H ms TFLOP/s)."""
    path = log_dir / "peers.log"
    decode, prefill = {}, {}
    if not path.exists():
        return decode, prefill
    for line in path.read_text().splitlines():
        if m := re.match(rf"\s*(\d+)\s+(\d+)\s+(\d+)\s+{NUM}\s+{NUM}\s+{NUM}\s+\d+\s+{NUM}\s+copy", line):
            decode[(int(m[1]), int(m[2]), int(m[3]))] = float(m[5])
        elif m := re.match(rf"\s*(\d+)\s+(\d+)\s+(\d+)\s+{NUM}\s+{NUM}\s*$", line):
            prefill[(int(m[1]), int(m[2]), int(m[3]))] = float(m[4])
    return decode, prefill


def peer_torch_rows(log_dir):
    """../shared/peers/torch_indexer.py (the fastest PyTorch version known): R L H GB floor_ms
    eager_ms compiled_ms compile_s same."""
    path = log_dir / "peers-torch.log"
    rows = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if m := re.match(rf"(\d+)\s+(\d+)\s+(\d+)\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}\s+True", line):
                rows[(int(m[1]), int(m[2]), int(m[3]))] = dict(eager=float(m[6]), compile=float(m[7]))
    return rows


def decode_rows(log_dir):
    rows = {b["key"]: b for b in bench_blocks(log_dir / "gpu-bench.log") if b["kind"] == "decode" and "ms" in b}
    for line in (log_dir / "torch-bench.log").read_text().splitlines():
        if m := re.match(rf"torch decode (\d+) x 4 x (\d+) tokens, H=(\d+) .*: eager {NUM} ms, "
                         rf"torch.compile {NUM} ms", line):
            key = (int(m[1]), int(m[2]), int(m[3]))
            if key in rows:
                rows[key].update(eager=float(m[4]), compile=float(m[5]))
    for key, times in peer_torch_rows(log_dir).items():  # preferred: the fastest PyTorch known
        if key in rows:
            rows[key].update(times)
    for key, ms in vllm_rows(log_dir)[0].items():
        if key in rows:
            rows[key]["vllm"] = ms
    return rows


def prefill_rows(log_dir):
    text = (log_dir / "gpu-prefill.log").read_text()
    peaks = {k: float(v) for k, v in re.findall(rf"^(fp8|f16)\b.*?peak.*?: {NUM} TFLOP/s", text, re.M)}
    rows = []
    vllm = vllm_rows(log_dir)[1]
    for b in bench_blocks(log_dir / "gpu-prefill.log"):
        if b["kind"] != "prefill" or "ms" not in b:
            continue
        P, L, H = b["key"]
        # Bytes SPEC's layouts imply, each read or written once: queries, index-K, the top-k.
        nbytes = P * L * H * 128 + P * L * 72 + P * L * H * 16 * 4
        rows.append(dict(P=P, L=L, H=H, ms=b["ms"], tflops=b["tflops"], work=b["work"], bytes=nbytes,
                         vllm=vllm.get((P, L, H))))
    for m in re.finditer(rf"torch prefill (\d+) x (\d+) tokens, H=(\d+) .*: eager {NUM} ms, torch.compile {NUM} ms",
                         text):
        for r in rows:
            if (r["P"], r["L"], r["H"]) == (int(m[1]), int(m[2]), int(m[3])):
                r.update(eager=float(m[4]), compile=float(m[5]))
    return rows, peaks


def fmt(v, spec):
    return format(v, spec) if v is not None else "-"


def tokens(n):
    return f"{n >> 20}M" if n >= 1 << 20 else f"{n >> 10}K"


def main():
    log_dir = Path(sys.argv[1])
    decode = decode_rows(log_dir)
    print("| decode step | ours | score / top-k | index-K GB/s | % of copy | vLLM Triton | vs vLLM | "
          "torch eager | torch.compile | vs eager | vs compile | targets |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    all_met = True
    for (R, L, H), r in decode.items():
        s = r["split"]
        parts = " / ".join(f"{s.get(k, 0):.3f}" for k in ("score_decode", "topk_decode"))
        eager, comp = r.get("eager"), r.get("compile")
        vs_compile = comp / r["ms"] if comp else None
        met = [vs_compile is not None and vs_compile >= 10]
        notes = ["10x compile " + ("met" if met[0] else "NOT met")]
        if (R, L, H) == (256, 131072, 1):
            met.append(r["pct"] >= 80)
            notes.append("80% of copy " + ("met" if met[-1] else "NOT met"))
        all_met &= all(met)
        print(f"| {R} x 4 x {tokens(L)}, H={H} | {r['ms']:.3f} ms | {parts} | {r['gbs']:.0f} | "
              f"{r['pct']:.1f}% ({r['copy']:.0f} GB/s) | {fmt(r.get('vllm'), '.3f')} ms | "
              f"{fmt(r.get('vllm') and r['vllm'] / r['ms'], '.2f')}x | {fmt(eager, '.3f')} ms | {fmt(comp, '.3f')} ms | "
              f"{fmt(eager and eager / r['ms'], '.0f')}x | {fmt(vs_compile, '.1f')}x | {'; '.join(notes)} |")
    prefill, peaks = prefill_rows(log_dir)
    copy = max((r["copy"] for r in decode.values()), default=0)
    print()
    print(f"| prefill step | ours | q.k work | ours | GB/s (% of copy) | fp8 floor ({peaks.get('fp8', 0):.0f} "
          f"TFLOP/s) | ours / fp8 floor | f16 floor ({peaks.get('f16', 0):.0f} TFLOP/s) | ours / f16 floor | "
          f"vLLM Triton | vs vLLM | torch eager | torch.compile | vs eager | vs compile | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in prefill:
        byte_ms = r["bytes"] / (copy * 1e6) if copy else 0
        fp8_ms = max(byte_ms, r["work"] / peaks["fp8"] * 1e3) if "fp8" in peaks else None
        f16_ms = max(byte_ms, r["work"] / peaks["f16"] * 1e3) if "f16" in peaks else None
        ratio = r["ms"] / fp8_ms if fp8_ms else None
        met = ratio is not None and ratio <= 2
        target = (r["P"], r["L"]) == (4, 32768)  # issue 5's prefill steps; others are for reference
        all_met &= met or not target
        gbs = r["bytes"] / (r["ms"] * 1e6)
        eager, comp = r.get("eager"), r.get("compile")
        print(f"| {r['P']} x {tokens(r['L'])}, H={r['H']} | {r['ms']:.3f} ms | {r['work']:.2f} TFLOP | "
              f"{r['tflops']:.1f} TFLOP/s | {gbs:.0f} ({100 * gbs / copy if copy else 0:.1f}%) | "
              f"{fp8_ms or 0:.3f} ms | {ratio or 0:.1f}x | {f16_ms or 0:.3f} ms | "
              f"{r['ms'] / f16_ms if f16_ms else 0:.1f}x | {fmt(r['vllm'], '.3f')} ms | "
              f"{fmt(r['vllm'] and r['vllm'] / r['ms'], '.2f')}x | {fmt(eager, '.1f')} ms | {fmt(comp, '.1f')} ms | "
              f"{fmt(eager and eager / r['ms'], '.0f')}x | {fmt(comp and comp / r['ms'], '.0f')}x | "
              f"{('within 2x ' + ('met' if met else 'NOT met')) if target else '(not a target)'} |")
    print()
    print("all targets met" if all_met else "targets not all met")


if __name__ == "__main__":
    main()
