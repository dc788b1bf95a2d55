"""m3idx.Indexer(device="cuda").decode, the graph-safe decode on device metadata, with PyTorch: every
golden case's decode requests eagerly; one CUDA graph per decode_query_len (1, 4, 8) captured once and
replayed over different seq_lens / block table contents (random lengths, padding requests with
seq_len 0, a 1M-token row, a bad page id); torch.compile with fullgraph=True; two steps on two streams
(eager and graph-replayed, with workspaces and without) and layers sharing a workspace. Each output is compared
bit for bit with forward() on host metadata (the path `bench/gpu.sh check` proves against the
reference) and checked by `m3idx check` (the scalar reference, tie-aware). Skipped where PyTorch or a
CUDA device is missing, as in CI here; `bench/gpu.sh python` runs it as a script on the H200."""
import json
import os
import subprocess
import tempfile

import numpy as np

import m3idx
from cuda_support import run_as_script, run_under_pytest, torch_or_reason

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")
ONE_M = 1 << 20


def save_case(folder, H, init, local, q, kv, table, lens, Q):
    """A decode-only case folder (SPEC §8) of numpy arrays."""
    os.makedirs(folder)
    D = lens.shape[0]
    json.dump({"format": "m3idx-case/1", "num_index_heads": H, "init_blocks": init, "local_blocks": local,
               "num_decodes": D, "decode_query_len": Q}, open(os.path.join(folder, "case.json"), "w"))
    arrays = {"q": q, "kv": kv, "block_table": table, "seq_lens": lens,
              "query_start_loc": np.arange(0, (D + 1) * Q, Q, dtype=np.int32)}
    for name, a in arrays.items():
        np.save(os.path.join(folder, name + ".npy"), np.ascontiguousarray(a))


def reference_check(work, name, H, init, local, q, kv, table, lens, Q, topk):
    folder, out = os.path.join(work, name), os.path.join(work, name + "_out")
    save_case(folder, H, init, local, q, kv, table, lens, Q)
    os.makedirs(out)
    np.save(os.path.join(out, "topk.npy"), topk)
    r = subprocess.run([os.environ["M3IDX_CLI"], "check", folder, out], capture_output=True, text=True)
    assert r.returncode == 0, f"{name}: {r.stdout}{r.stderr}"
    subprocess.run(["rm", "-rf", folder, out], check=True)


def forward_of(torch, idx, q, kv, table, lens, Q):
    """forward() on host metadata: the bit-for-bit yardstick of decode()."""
    t, s = table.cpu(), lens.cpu()
    D = s.shape[0]
    qsl = torch.arange(0, (D + 1) * Q, Q, dtype=torch.int32)
    return idx.forward(q, kv, t, s, qsl, num_decodes=D, decode_query_len=Q).clone()


def golden_eager(torch, work):
    for case in sorted(os.listdir(GOLDEN)):
        folder = os.path.join(GOLDEN, case)
        if not os.path.isdir(folder):
            continue
        meta = json.load(open(os.path.join(folder, "case.json")))
        D, Q, H = meta["num_decodes"], meta["decode_query_len"], meta["num_index_heads"]
        if D == 0:
            continue
        a = {n: np.load(os.path.join(folder, n + ".npy")) for n in ("q", "kv", "block_table", "seq_lens")}
        g = {n: torch.from_numpy(a[n]).cuda() for n in a}
        with m3idx.Indexer(num_index_heads=H, init_blocks=meta["init_blocks"], local_blocks=meta["local_blocks"],
                           device="cuda", max_decode_query_len=max(4, Q)) as idx:
            got = idx.decode(g["q"][:D * Q], g["kv"], g["block_table"][:D], g["seq_lens"][:D])
            want = forward_of(torch, idx, g["q"][:D * Q], g["kv"], g["block_table"][:D], g["seq_lens"][:D], Q)
            assert torch.equal(got, want), case
            idx.check()
            reference_check(work, f"golden_{case}", H, meta["init_blocks"], meta["local_blocks"], a["q"][:D * Q],
                            a["kv"], a["block_table"][:D], a["seq_lens"][:D], Q, got.cpu().numpy())
        print(f"ok golden {case}: decode() eager = forward() and the reference")


def random_kv(rng, pages):
    kv = rng.integers(0, 256, size=(pages, 9216), dtype=np.uint8)
    scales = kv[:, 8192:]
    scales[(scales & 0x7F) == 0x7F] = 0x38  # no NaN scales here: the NaN rules have their own cases
    return kv


def graph_replays(torch, work):
    rng = np.random.default_rng(5)
    D, pages = 6, 8192 + 6 * 160
    kv_np = random_kv(rng, pages)
    kv = torch.from_numpy(kv_np).cuda()
    for Q, H in ((1, 1), (4, 4), (8, 2)):
        init, local = 1, 1
        with m3idx.Indexer(num_index_heads=H, init_blocks=init, local_blocks=local, device="cuda", max_num_decodes=8,
                           max_decode_query_len=8, max_model_len=ONE_M) as idx:
            q = torch.zeros((D * Q, H, 128), dtype=torch.uint8, device="cuda")
            table = torch.zeros((D, 8192), dtype=torch.int32, device="cuda")
            lens = torch.zeros((D,), dtype=torch.int32, device="cuda")
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the capture, as torch.cuda.graph asks
                idx.decode(q, kv, table, lens)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = idx.decode(q, kv, table, lens)
            contents = {
                "random": rng.integers(0, 20001, size=D),
                "padding": np.array([5000, 0, 0, 12345, 0, 1]),
                "1m_row": np.array([ONE_M, 3000, 0, 777, 20000, 128]),
            }
            for name, lens_np in contents.items():
                lens_np = lens_np.astype(np.int32)
                table_np = np.zeros((D, 8192), dtype=np.int32)
                for i in range(D):  # every row its own pages, in a random order
                    n = (int(lens_np[i]) + 127) // 128
                    table_np[i, :n] = rng.permutation(pages)[:n]
                    table_np[i, n:] = rng.integers(-(1 << 30), 1 << 30, size=8192 - n)  # never read
                q_np = (rng.integers(0, 256, size=(D * Q, H, 128)) & 0xF7).astype(np.uint8)  # no NaN query bytes
                q.copy_(torch.from_numpy(q_np))
                table.copy_(torch.from_numpy(table_np))
                lens.copy_(torch.from_numpy(lens_np))
                graph.replay()
                torch.cuda.synchronize()
                got = out.clone()
                want = forward_of(torch, idx, q, kv, table, lens, Q)
                assert torch.equal(got, want), f"q_len {Q} {name}"
                idx.check()
                for i in np.flatnonzero(lens_np == 0):
                    assert (got[:, i * Q:(i + 1) * Q] == -1).all(), f"padding request {i}"
                reference_check(work, f"graph_q{Q}_{name}", H, init, local, q_np, kv_np, table_np, lens_np, Q,
                                got.cpu().numpy())
                print(f"ok graph q_len {Q} H {H} {name}: replay = forward() and the reference")
            # A bad page id in a replay: that request's rows get no blocks, the rest stay right, and
            # check() names it.
            table_np[3, 0] = pages + 7
            table.copy_(torch.from_numpy(table_np))
            graph.replay()
            torch.cuda.synchronize()
            assert (out[:, 3 * Q:4 * Q] == -1).all()
            assert torch.equal(out[:, :3 * Q], got[:, :3 * Q])
            try:
                idx.check()
                raise AssertionError("a bad page id went unreported")
            except m3idx.Error as e:
                assert f"decode.block_table[3][0] = {pages + 7} is not a page of kv_cache" in str(e), str(e)
            print(f"ok graph q_len {Q}: a bad page id in a replay is reported: no blocks for its request")


def compiled(torch, work):
    rng = np.random.default_rng(9)
    D, Q, H, pages = 5, 4, 2, 400
    kv = torch.from_numpy(random_kv(rng, pages)).cuda()
    q = torch.from_numpy(rng.integers(0, 120, size=(D * Q, H, 128)).astype(np.uint8)).cuda()
    lens = torch.tensor([3000, 0, 9000, 128, 17], dtype=torch.int32, device="cuda")
    table = torch.from_numpy(rng.permutation(pages)[:D * 80].reshape(D, 80).astype(np.int32)).cuda()
    with m3idx.Indexer(num_index_heads=H, device="cuda", max_num_decodes=8) as idx:
        eager = idx.decode(q, kv, table, lens)
        step = torch.compile(lambda q, kv, t, s: idx.decode(q, kv, t, s) + 0, fullgraph=True)
        got = step(q, kv, table, lens)
        assert torch.equal(got, eager)
        out = torch.full_like(eager, 7)
        step_out = torch.compile(lambda q, kv, t, s, o: idx.decode(q, kv, t, s, out=o), fullgraph=True)
        step_out(q, kv, table, lens, out)
        assert torch.equal(out, eager)
        assert torch.equal(eager, forward_of(torch, idx, q, kv, table, lens, Q))
    print("ok torch.compile(fullgraph=True): decode() and decode(out=) equal eager and forward()")


def packing(torch, work):
    """decode() packs a tensor again only when its data pointer, shape, strides or dtype differ from
    its slot's: a view of the same storage with fewer rows, another dtype or another object, and
    bad arguments between good calls, all give the right answer or the named error."""
    rng = np.random.default_rng(10)
    D, Q, H, pages = 4, 4, 1, 300
    kv = torch.from_numpy(random_kv(rng, pages)).cuda()
    q = torch.from_numpy(rng.integers(0, 120, size=(D * Q, H, 128)).astype(np.uint8)).cuda()
    lens = torch.tensor([3000, 900, 5000, 77], dtype=torch.int32, device="cuda")
    table = torch.from_numpy(rng.permutation(pages)[:D * 60].reshape(D, 60).astype(np.int32)).cuda()

    def expect(error, what, call):
        try:
            call()
        except (m3idx.Error, TypeError) as e:
            assert isinstance(e, error) and what in str(e), f"{what}: got {type(e).__name__}: {e}"
            return
        raise AssertionError(f"{what}: no error")

    with m3idx.Indexer(num_index_heads=H, device="cuda", max_num_decodes=8) as idx:
        out = torch.empty((H, D * Q, 16), dtype=torch.int32, device="cuda")
        want = forward_of(torch, idx, q, kv, table, lens, Q)
        assert torch.equal(idx.decode(q, kv, table, lens, out=out), want)
        # The first two requests through views of the same storage (same data pointers).
        two = idx.decode(q[:2 * Q], kv, table[:2], lens[:2], out=torch.empty_like(out[:, :2 * Q]))
        assert torch.equal(two, want[:, :2 * Q])
        assert torch.equal(idx.decode(q.view(q.shape), kv, table, lens, out=out), want)
        expect(TypeError, "kv_cache: expected a torch.Tensor", lambda: idx.decode(q, kv.cpu().numpy(), table, lens, out=out))
        expect(m3idx.Error, "seq_lens: expected dtype torch.int32", lambda: idx.decode(q, kv, table, lens.long(), out=out))
        expect(m3idx.Error, "block_table", lambda: idx.decode(q, kv, table.cpu(), lens, out=out))
        expect(m3idx.Error, "out", lambda: idx.decode(q, kv, table, lens, out=out[:, :Q]))
        expect(m3idx.Error, "q", lambda: idx.decode(q.view(torch.int8), kv, table, lens, out=out))
        out.fill_(5)
        assert torch.equal(idx.decode(q, kv, table, lens, out=out), want)
    print("ok decode() packing: views of one storage, another object, bad arguments between good calls")


def concurrent_streams(torch, work):
    """Issue 40: one Indexer, two different decode steps in flight on two streams (dual-batch
    overlap) got 200 of 400 outputs wrong with a clean status. With a workspace per stream each
    step is right and they overlap; in the indexer's own workspace the second stream waits for the
    first (right, not overlapped); two graphs captured on two streams with their own workspaces
    replay concurrently and right; layers (Indexers built without their own workspace) share one."""
    rng = np.random.default_rng(12)
    D, Q, H, pages = 64, 4, 1, 64 * 128 + 64
    kv = torch.from_numpy(random_kv(rng, pages)).cuda()

    def step(context):
        lens_np = rng.integers(context // 2, context, size=D).astype(np.int32)
        table_np = np.stack([rng.permutation(pages)[:context // 128 + 1] for _ in range(D)]).astype(np.int32)
        q_np = (rng.integers(0, 256, size=(D * Q, H, 128)) & 0xF7).astype(np.uint8)
        return (torch.from_numpy(q_np).cuda(), torch.from_numpy(table_np).cuda(), torch.from_numpy(lens_np).cuda())

    a, b = step(16000), step(9000)
    with m3idx.Indexer(num_index_heads=H, device="cuda", max_num_decodes=D, max_decode_query_len=Q,
                       max_model_len=ONE_M) as idx:
        want = [forward_of(torch, idx, s[0], kv, s[1], s[2], Q) for s in (a, b)]
        assert not torch.equal(want[0], want[1])
        streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        workspaces = [idx.new_workspace(), idx.new_workspace()]
        outs = [torch.empty_like(w) for w in want]
        torch.cuda.synchronize()

        def race(use_workspaces, rounds=20):
            wrong = 0
            for _ in range(rounds):
                for o in outs:
                    o.fill_(7)
                torch.cuda.synchronize()
                for i, (s, st) in enumerate(zip((a, b), streams)):
                    with torch.cuda.stream(st):
                        idx.decode(s[0], kv, s[1], s[2], out=outs[i], workspace=workspaces[i] if use_workspaces else None)
                torch.cuda.synchronize()
                wrong += sum(not torch.equal(o, w) for o, w in zip(outs, want))
            return wrong

        assert race(True) == 0, "a workspace per stream"
        assert race(False) == 0, "the own workspace on two streams"
        idx.check()
        # Two graphs, each captured on its stream with its workspace, replayed at the same time.
        graphs = []
        for i, (s, st) in enumerate(zip((a, b), streams)):
            with torch.cuda.stream(st):
                idx.decode(s[0], kv, s[1], s[2], out=outs[i], workspace=workspaces[i])
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=st):
                idx.decode(s[0], kv, s[1], s[2], out=outs[i], workspace=workspaces[i])
            graphs.append(g)
        wrong = 0
        for _ in range(20):
            for o in outs:
                o.fill_(7)
            torch.cuda.synchronize()
            for g, st in zip(graphs, streams):
                with torch.cuda.stream(st):
                    g.replay()
            torch.cuda.synchronize()
            wrong += sum(not torch.equal(o, w) for o, w in zip(outs, want))
        assert wrong == 0, f"{wrong} of 40 concurrent graph replays wrong"
        idx.check()
        # Overlap: both steps on two streams with their workspaces, against one after the other.
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = {}
        for name, parallel in (("one stream", False), ("two streams", True)):
            torch.cuda.synchronize()
            start.record()
            for _ in range(20):
                for i, s in enumerate((a, b)):
                    with torch.cuda.stream(streams[i] if parallel else streams[0]):
                        idx.decode(s[0], kv, s[1], s[2], out=outs[i], workspace=workspaces[i])
            for st in streams:
                torch.cuda.current_stream().wait_stream(st)
            end.record()
            torch.cuda.synchronize()
            times[name] = start.elapsed_time(end) / 20
        print(f"ok decode on two streams: 40 eager steps with a workspace each, 40 in the own workspace and 40 "
              f"concurrent graph replays equal forward(); per pair of steps {times['one stream']:.3f} ms on one "
              f"stream, {times['two streams']:.3f} ms on two")
        # Layers sharing one workspace: Indexers built without their own, each step in one graph.
        before = torch.cuda.mem_get_info()[0]
        layers = [m3idx.Indexer(num_index_heads=H, device="cuda", max_num_decodes=D, max_decode_query_len=Q,
                                max_model_len=ONE_M, reserve_decode_workspace=False) for _ in range(3)]
        grown = before - torch.cuda.mem_get_info()[0]
        assert grown < idx.decode_workspace_bytes(), f"3 layers without workspaces took {grown} bytes"
        shared = layers[0].new_workspace()
        layer_outs = [torch.empty_like(want[0]) for _ in layers]
        for layer, o in zip(layers, layer_outs):
            layer.decode(a[0], kv, a[1], a[2], out=o, workspace=shared)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for layer, o in zip(layers, layer_outs):
                layer.decode(a[0], kv, a[1], a[2], out=o, workspace=shared)
        for o in layer_outs:
            o.fill_(7)
        g.replay()
        torch.cuda.synchronize()
        assert all(torch.equal(o, want[0]) for o in layer_outs)
        for layer in layers:
            layer.close()
        step_ws = torch.compile(lambda q, t, s_, w: idx.decode(q, kv, t, s_, workspace=w) + 0, fullgraph=True)
        assert torch.equal(step_ws(a[0], a[1], a[2], workspaces[0]), want[0])
        workspace_mib = idx.decode_workspace_bytes() >> 20
    print(f"ok 3 layers share one workspace of {workspace_mib} MiB (graph-replayed), "
          f"none reserved their own (+{grown >> 20} MiB); torch.compile with a workspace")


def check_all():
    torch, reason = torch_or_reason()
    if torch is None:
        return reason
    with tempfile.TemporaryDirectory() as work:
        golden_eager(torch, work)
        graph_replays(torch, work)
        compiled(torch, work)
        packing(torch, work)
        concurrent_streams(torch, work)
    return ""


def test_decode_cuda():
    run_under_pytest(check_all)


if __name__ == "__main__":
    run_as_script(check_all, "python cuda decode: all checked")
