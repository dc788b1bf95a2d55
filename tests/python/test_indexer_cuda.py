"""m3idx.Indexer(device="cuda") from Python with PyTorch tensors: every golden case and generated
steps through forward() on torch.cuda.current_stream(), the output written in place, checked by
`m3idx check`, and through plan() + run() (two indexers, two streams), equal to forward(). Skipped (with the reason) where PyTorch or a CUDA device is missing, as in CI here;
on the GPU machine `bench/gpu.sh python` runs it as a script (no pytest needed there)."""
import json
import os
import subprocess
import tempfile

import numpy as np

import m3idx
from cuda_support import run_as_script, run_under_pytest, torch_or_reason

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")


def _cases(work):
    """(name, folder) of the golden cases and generated steps (decode_query_len 1 and 8, 4 heads,
    a 1M-token row next to prefills)."""
    cases = [(d, os.path.join(GOLDEN, d)) for d in sorted(os.listdir(GOLDEN))
             if os.path.isdir(os.path.join(GOLDEN, d))]
    for name, args in [("q1_h1", ["--heads", "1", "--decodes", "6", "--decode-query-len", "1", "--context", "0:900", "--prefills", "1"]),
                       ("q8_h4", ["--heads", "4", "--decodes", "5", "--decode-query-len", "8", "--context", "0:20000", "--prefills", "2"]),
                       ("mixed_1m", ["--heads", "1", "--decodes", "1", "--context", "1048576", "--prefills", "1",
                                     "--prefill-len", "1:9", "--prefill-context", "1048576"])]:
        folder = os.path.join(work, name)
        subprocess.run([os.environ["M3IDX_CLI"], "gen", "--out", folder, "--seed", "7"] + args, check=True,
                       capture_output=True)
        cases.append((name, folder))
    return cases


def check_cases():
    torch, reason = torch_or_reason()
    if torch is None:
        return reason
    with tempfile.TemporaryDirectory() as work:
        for name, folder in _cases(work):
            meta = json.load(open(os.path.join(folder, "case.json")))
            a = {n: np.load(os.path.join(folder, n + ".npy")) for n in
                 ("q", "kv", "block_table", "seq_lens", "query_start_loc")}
            cuda = {n: torch.from_numpy(a[n]).cuda() for n in ("q", "kv")}
            meta_on = {n: torch.from_numpy(a[n]) for n in ("block_table", "seq_lens", "query_start_loc")}
            idx = m3idx.Indexer(num_index_heads=meta["num_index_heads"], init_blocks=meta["init_blocks"],
                                local_blocks=meta["local_blocks"], device="cuda",
                                max_decode_query_len=max(4, meta["decode_query_len"]))
            T, H = a["q"].shape[0], meta["num_index_heads"]
            out = torch.full((H, T, 16), 0x7B7B7B7B, dtype=torch.int32, device="cuda")
            for where, m in (("host metadata", meta_on), ("device metadata", {k: v.cuda() for k, v in meta_on.items()})):
                got = idx.forward(cuda["q"], cuda["kv"], m["block_table"], m["seq_lens"], m["query_start_loc"],
                                  num_decodes=meta["num_decodes"], decode_query_len=meta["decode_query_len"], out=out)
                assert got is out
                torch.cuda.current_stream().synchronize()
                outdir = os.path.join(work, f"out_{name}_{where.split()[0]}")
                os.makedirs(outdir)
                np.save(os.path.join(outdir, "topk.npy"), out.cpu().numpy())
                r = subprocess.run([os.environ["M3IDX_CLI"], "check", folder, outdir], capture_output=True, text=True)
                assert r.returncode == 0, f"{name} ({where}): {r.stdout}{r.stderr}"
                print(f"ok {name} ({where}): {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else 'checked'}")
            # plan + run: equal to forward, by two layers' indexers, on another stream than the
            # plan's upload, after the caller reused its arrays.
            want = out.clone()
            arrays = {k: v.clone() for k, v in meta_on.items()}
            layer = m3idx.Indexer(num_index_heads=H, init_blocks=meta["init_blocks"],
                                  local_blocks=meta["local_blocks"], device="cuda",
                                  max_decode_query_len=max(4, meta["decode_query_len"]))
            plan = idx.plan(arrays["block_table"], arrays["seq_lens"], arrays["query_start_loc"],
                            num_decodes=meta["num_decodes"], decode_query_len=meta["decode_query_len"])
            for v in arrays.values():
                v.fill_(-7)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            for who, stream in ((idx, torch.cuda.current_stream()), (layer, side), (idx, side)):
                with torch.cuda.stream(stream):
                    out.fill_(0x7B7B7B7B)
                    assert who.run(plan, cuda["q"], cuda["kv"], out=out) is out
                    stream.synchronize()
                    assert torch.equal(out, want), f"{name}: plan + run differs from forward"
            print(f"ok {name}: plan + run equal forward (two indexers, two streams)")
            plan.close()
            layer.close()
            try:
                idx.forward(cuda["q"].cpu(), cuda["kv"], meta_on["block_table"], meta_on["seq_lens"],
                            meta_on["query_start_loc"], num_decodes=meta["num_decodes"],
                            decode_query_len=meta["decode_query_len"])
                raise AssertionError("a host q was accepted on device cuda")
            except m3idx.Error as e:
                assert "q: expected a tensor on cuda:0" in str(e), str(e)
            idx.close()
    return ""


def test_cuda_cases():
    run_under_pytest(check_cases)


if __name__ == "__main__":
    run_as_script(check_cases, "python cuda: all cases checked")
