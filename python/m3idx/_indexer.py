"""m3idx.Indexer: one indexer layer's step (SPEC §4-5) from Python, over the C ABI.

On device "cpu" arrays are NumPy arrays and the host JIT backend runs the step; on "cuda" they are
PyTorch tensors (read in place through data_ptr, no copies of q, kv_cache or the output) and the
step runs on torch.cuda.current_stream()."""
import ctypes
import struct
import threading
import weakref

from . import _capi

TOPK_BLOCKS = 16
HEAD_DIM = 128
PAGE_BYTES = 9216


class Error(ValueError):
    """The library refused an argument or failed; the message is its one line naming the problem."""


def _check(err):
    if err:
        lib = _capi.library()
        message = lib.m3idx_error_message(err).decode("utf-8", "replace")
        lib.m3idx_error_free(err)
        raise Error(message)


def _parse_device(device):
    """"cpu" or "cuda[:N]" as the C ABI's (device_kind, device_index)."""
    kind, _, index = str(device).partition(":")
    kinds = {"cpu": _capi.DEVICE_HOST, "cuda": _capi.DEVICE_CUDA}
    if kind not in kinds or (index and not index.isdigit()):
        raise Error(f"device: expected 'cpu' or 'cuda[:N]', got {device!r}")
    return kinds[kind], int(index or 0)


def _c_int(name, value, bits):
    """`value` as a Python int that a ctypes c_int<bits> field holds unchanged (ctypes itself
    wraps: 2**32 + 1 would reach the library as 1 and pass its checks)."""
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise Error(f"{name}: expected an integer, got {value!r}") from None
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise Error(f"{name}: expected a {bits}-bit integer, got {v}")
    return v


def _fill(t, data, dtype, shape, strides, device_kind, device_index):
    if len(shape) > 4:
        raise Error(f"tensor of {len(shape)} dimensions (at most 4)")
    t.data = data
    t.dtype = dtype
    t.ndim = len(shape)
    for i, (n, s) in enumerate(zip(shape, strides)):
        t.shape[i] = n
        t.strides[i] = s
    t.device_kind = device_kind
    t.device_index = device_index
    return t


_NUMPY_DTYPES = {"uint8": _capi.DTYPE_U8, "int32": _capi.DTYPE_I32, "float32": _capi.DTYPE_F32}


def _numpy_tensor(a, keep):
    keep.append(a)  # alive until the call returns
    return _fill(_capi.Tensor(), a.ctypes.data, _NUMPY_DTYPES[a.dtype.name], a.shape,
                 [s // a.itemsize for s in a.strides], _capi.DEVICE_HOST, 0)


class _NumpyArgs:
    """NumPy arrays as m3idx tensors on the host; keeps what it made alive for the call."""

    def __init__(self):
        import numpy
        self.np = numpy
        self.keep = []

    def array(self, name, a, dtype, ndim):
        np = self.np
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name}: expected a numpy.ndarray (device 'cpu'), got {type(a).__name__}")
        if a.dtype != np.dtype(dtype):
            raise Error(f"{name}: expected dtype {dtype}, got {a.dtype}")
        if a.ndim != ndim:
            raise Error(f"{name}: expected {ndim} dimensions, got shape {tuple(a.shape)}")
        if any(s < 0 or s % a.itemsize for s in a.strides):
            raise Error(f"{name}: strides {a.strides} are not whole, non-negative elements; pass a copy")
        return a

    def tensor(self, a):
        return _numpy_tensor(a, self.keep)

    @staticmethod
    def contiguous(a):
        return a.flags.c_contiguous

    def host(self, name, a, dtype, ndim):  # metadata: already on the host
        return self.array(name, a, dtype, ndim)

    def empty(self, shape):
        return self.np.empty(shape, dtype=self.np.int32)


class _TorchArgs:
    """PyTorch CUDA tensors as m3idx tensors; metadata is read on the host (a copy if on the GPU)."""

    def __init__(self, device_index):
        import numpy
        import torch
        self.np = numpy
        self.torch = torch
        self.device_index = device_index
        self.keep = []
        self._dtypes = {torch.uint8: _capi.DTYPE_U8, torch.int32: _capi.DTYPE_I32, torch.float32: _capi.DTYPE_F32}

    def array(self, name, a, dtype, ndim):
        torch = self.torch
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor (device 'cuda'), got {type(a).__name__}")
        if a.device.type != "cuda" or a.device.index != self.device_index:
            raise Error(f"{name}: expected a tensor on cuda:{self.device_index}, got {a.device}")
        if a.dtype != getattr(torch, dtype):
            raise Error(f"{name}: expected dtype torch.{dtype}, got {a.dtype}")
        if a.dim() != ndim:
            raise Error(f"{name}: expected {ndim} dimensions, got shape {tuple(a.shape)}")
        return a

    @staticmethod
    def contiguous(a):
        return a.is_contiguous()

    def tensor(self, a):
        if isinstance(a, self.np.ndarray):  # metadata, read on the host
            return _numpy_tensor(a, self.keep)
        self.keep.append(a)
        return _fill(_capi.Tensor(), a.data_ptr(), self._dtypes[a.dtype], tuple(a.shape), a.stride(),
                     _capi.DEVICE_CUDA, self.device_index)

    def host(self, name, a, dtype, ndim):
        torch = self.torch
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(a).__name__}")
        if a.dtype != getattr(torch, dtype):
            raise Error(f"{name}: expected dtype torch.{dtype}, got {a.dtype}")
        if a.dim() != ndim:
            raise Error(f"{name}: expected {ndim} dimensions, got shape {tuple(a.shape)}")
        return a.cpu().numpy()

    def empty(self, shape):
        return self.torch.empty(shape, dtype=self.torch.int32, device=f"cuda:{self.device_index}")


# m3idx_tensor's C layout (native alignment: 88 bytes), packed in one call per tensor: decode()'s
# host time is mostly Python, and one pack_into costs a fraction of setting ctypes fields one by one.
_TENSOR = struct.Struct("@Pii4q4qii")
assert _TENSOR.size == ctypes.sizeof(_capi.Tensor)
_TORCH_DTYPES = {}  # torch dtype -> m3idx dtype, filled when torch is imported
_LIVE = {}  # op id -> weakref to an Indexer, for the torch.library ops (m3idx/_torch_ops.py)
_PAD = [(0,) * (4 - n) for n in range(5)]  # shape / stride padding of an n-dimensional tensor


class _DecodeArgs:
    """decode()'s six tensors (q, kv_cache, block_table, seq_lens, out, workspace) as m3idx_tensor
    structs in one buffer, refilled per call, and what each slot holds. One per calling thread:
    ctypes lets go of the GIL during the library call, so a buffer shared by two threads could be
    repacked by one while the other's call reads it (that gave one thread the other's step)."""

    def __init__(self):
        self.buf = ctypes.create_string_buffer(_TENSOR.size * 6)
        base = ctypes.addressof(self.buf)
        self.raw = [ctypes.c_void_p(base + i * _TENSOR.size) for i in range(6)]  # each struct's address
        self.packed = [None] * 6  # (data_ptr, shape, stride, dtype) each slot holds (torch tensors)
        self.stream_key, self.stream_arg = None, None  # the last stream, as an int and a c_void_p

    def pack_numpy(self, i, a):
        """Host NumPy array `a` into slot i, named and typed as the slot (_SLOT_NAMES: uint8 q,
        kv_cache and workspace, int32 the others); the library checks the rest."""
        name = _SLOT_NAMES[i]
        dtype = _NUMPY_DTYPES.get(a.dtype.name)
        if dtype is None:
            raise Error(f"{name}: expected dtype {'uint8' if i in (0, 1, 5) else 'int32'}, got {a.dtype}")
        if any(st < 0 or st % a.itemsize for st in a.strides):
            raise Error(f"{name}: strides {a.strides} are not whole, non-negative elements; pass a copy")
        n = a.ndim
        if n > 4:
            raise Error(f"tensor of {n} dimensions (at most 4)")
        pad = (0,) * (4 - n)
        _TENSOR.pack_into(self.buf, i * _TENSOR.size, a.ctypes.data, dtype, n, *a.shape, *pad,
                          *[st // a.itemsize for st in a.strides], *pad, _capi.DEVICE_HOST, 0)


# The tensors of decode() (and, slots 0, 1 and 4, of run()), in _DecodeArgs' slot order.
_SLOT_NAMES = ("q", "kv_cache", "block_table", "seq_lens", "out", "workspace")


class _Closing:
    """An object over a library handle that close() frees: also when dropped, or at the end of a
    `with` block."""

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Indexer(_Closing):
    """The lightning indexer of one layer: per query row and head, the top 16 logical block ids.

    Indexer(num_index_heads=H, init_blocks=I, local_blocks=L, device="cpu" | "cuda",
            max_num_decodes=256, max_decode_query_len=4, max_model_len=1 << 20,
            check_decode_sync=False, reserve_decode_workspace=True)

    The kernels of the configured shapes are compiled (or read from the cache) at construction,
    and, unless reserve_decode_workspace is False, the indexer's own decode workspace is reserved
    for the capacities (max_num_decodes x max_decode_query_len rows, max_model_len tokens).

    Threads and streams (include/m3idx/Indexer.h): calls from several threads take turns and each
    gets its own answer. decode() steps given different workspaces (new_workspace()) are
    independent and overlap across streams; steps sharing one must be ordered, as on one stream,
    so one workspace serves every layer of a step, and each stream decoding at the same time
    (dual-batch overlap) needs its own; graphs that may replay at the same time need different
    workspaces. Without a workspace decode() uses the indexer's own: an eager step on another
    stream than the last waits for the last. forward() steps share the indexer's scratch and are
    ordered the same way."""

    def __init__(self, num_index_heads=1, init_blocks=0, local_blocks=1, device="cpu",
                 max_num_decodes=256, max_decode_query_len=4, max_model_len=1 << 20, warmup=True,
                 check_decode_sync=False, reserve_decode_workspace=True, decode_cp=None):
        self._handle = None  # first: __del__ runs even when construction fails
        self._op_id = None
        lib = _capi.library()
        self.device_kind, self.device_index = _parse_device(device)
        if not 1 <= _c_int("max_num_decodes", max_num_decodes, 32) <= 256:
            raise Error(f"max_num_decodes: expected 1..256, got {max_num_decodes}")
        if not 1 <= _c_int("max_decode_query_len", max_decode_query_len, 32) <= 8:
            raise Error(f"max_decode_query_len: expected 1..8, got {max_decode_query_len}")
        self.num_index_heads = _c_int("num_index_heads", num_index_heads, 32)
        self.max_num_decodes = int(max_num_decodes)
        self.max_decode_query_len = int(max_decode_query_len)
        config = _capi.Config()
        lib.m3idx_config_init(ctypes.byref(config))
        config.num_index_heads = self.num_index_heads
        config.init_blocks = _c_int("init_blocks", init_blocks, 32)
        config.local_blocks = _c_int("local_blocks", local_blocks, 32)
        config.max_model_len = _c_int("max_model_len", max_model_len, 64)
        config.decode_query_len = self.max_decode_query_len
        config.max_num_decodes = self.max_num_decodes
        config.max_decode_query_len = self.max_decode_query_len
        config.check_decode_sync = 1 if check_decode_sync else 0
        config.reserve_decode_workspace = 1 if reserve_decode_workspace else 0
        handle = ctypes.c_void_p()
        _check(lib.m3idx_indexer_create(ctypes.byref(config), self.device_kind, self.device_index,
                                        ctypes.byref(handle)))
        self._handle = handle
        self._per_thread = threading.local()  # .args: this thread's _DecodeArgs
        self._lib = lib
        # decode()'s call without argtypes, every argument already a ctypes object: ctypes'
        # conversions of the eight arguments were 1.6-1.8 us of a 12-14 us call on the H200.
        self._decode_untyped = _capi.untyped(lib, "m3idx_indexer_decode", ctypes.c_void_p)
        self._run_untyped = _capi.untyped(lib, "m3idx_indexer_run", ctypes.c_void_p)
        self._torch = None
        if self.device_kind == _capi.DEVICE_CUDA:
            import torch
            from . import _torch_ops  # registers torch.ops.m3idx.decode / decode_out
            self._torch = torch
            _TORCH_DTYPES.update({torch.uint8: _capi.DTYPE_U8, torch.int32: _capi.DTYPE_I32,
                                  torch.float32: _capi.DTYPE_F32})
            # The raw current stream without building a torch.cuda.Stream object (a few µs a call).
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            self._stream = (lambda: raw(self.device_index)) if raw else \
                (lambda: torch.cuda.current_stream(self.device_index).cuda_stream)
            self._op_id = id(self)
            _LIVE[self._op_id] = weakref.ref(self)
        if decode_cp is not None:  # before the warm-up, which then builds the CP kernels too
            self.join_decode_cp(decode_cp)
        if warmup:
            _check(lib.m3idx_indexer_warmup(self._handle))

    def close(self):
        if self._op_id is not None:
            _LIVE.pop(self._op_id, None)
            self._op_id = None
        if self._handle:
            _capi.library().m3idx_indexer_destroy(self._handle)
            self._handle = None

    def _open_handle(self, what):
        # A closed indexer's NULL handle would read as the C ABI's -1 / 0 answers: refuse instead.
        if not self._handle:
            raise Error(f"{what}: the indexer is closed")
        return self._handle

    def decode_workspace_bytes(self):
        """Bytes of a decode workspace for this indexer's capacities (the same for every Indexer
        of one configuration)."""
        return int(self._lib.m3idx_indexer_decode_workspace_bytes(self._open_handle("decode_workspace_bytes")))

    def new_workspace(self):
        """A zeroed decode workspace on the indexer's device (NumPy uint8 on "cpu", a torch.uint8
        tensor on "cuda"): pass it to decode() of every layer that runs on one stream."""
        n = self.decode_workspace_bytes()
        if self._torch is None:
            import numpy
            return numpy.zeros(n, dtype=numpy.uint8)
        return self._torch.zeros(n, dtype=self._torch.uint8, device=f"cuda:{self.device_index}")

    def join_decode_cp(self, decode_cp):
        """Joins this process's DecodeCp (include/m3idx/Indexer.h, Indexer::joinDecodeCp; not
        collective; or pass decode_cp= to the constructor). decode() steps, and forward()'s decode
        rows, that SPEC §6 allows (4 ranks, one head a rank, decode_query_len 4, at most 256
        requests, no dual-batch overlap) are then scored by the group; others locally."""
        if not isinstance(decode_cp, DecodeCp):
            raise Error(f"decode_cp: expected an m3idx.DecodeCp, got {type(decode_cp).__name__}")
        _check(_capi.library().m3idx_indexer_join_decode_cp(self._open_handle("join_decode_cp"),
                                                            decode_cp._open_handle("join_decode_cp")))

    def decode_cp_active(self):
        """Whether the last forward() or decode() was scored by decode CP."""
        return _capi.library().m3idx_indexer_decode_cp_active(self._open_handle("decode_cp_active")) == 1

    def compiles_after_warmup(self):
        """Kernels compiled by steps after construction (a shape the warm-up did not cover)."""
        return _capi.library().m3idx_indexer_compiles_after_warmup(self._open_handle("compiles_after_warmup"))

    def forward(self, q, kv_cache, block_table, seq_lens, query_start_loc, num_decodes=0,
                decode_query_len=4, out=None):
        """Top-k block ids, int32 [H, T, 16] (-1 past a row's visible blocks), of a step whose
        first num_decodes requests are decodes of decode_query_len rows (SPEC §3 shapes: q uint8
        [T, H, 128], kv_cache uint8 [pages, 9216], block_table int32 [R, M], seq_lens int32 [R],
        query_start_loc int32 [R + 1]). Into `out` when given. The same as
        run(plan(block_table, seq_lens, query_start_loc, num_decodes, decode_query_len), q,
        kv_cache, out), which an engine uses to plan a step once for all its layers."""
        if not self._handle:
            raise Error("forward: the indexer is closed")
        args = self._args()
        q = args.array("q", q, "uint8", 3)
        kv_cache = args.array("kv_cache", kv_cache, "uint8", 2)
        T, H = q.shape[0], self.num_index_heads
        if tuple(q.shape[1:]) != (H, HEAD_DIM) or not args.contiguous(q):
            raise Error(f"q: expected a contiguous [T, {H}, {HEAD_DIM}] tensor, got shape {tuple(q.shape)}"
                        f"{'' if args.contiguous(q) else ' (a strided view)'}")
        if kv_cache.shape[1] != PAGE_BYTES or not args.contiguous(kv_cache):
            raise Error(f"kv_cache: expected a contiguous [pages, {PAGE_BYTES}] tensor, got shape "
                        f"{tuple(kv_cache.shape)}{'' if args.contiguous(kv_cache) else ' (a strided view)'}")
        decode, prefill = self._metadata(args, block_table, seq_lens, query_start_loc, num_decodes,
                                         decode_query_len)
        if out is None:
            out = args.empty((H, T, TOPK_BLOCKS))
        else:
            out = args.array("out", out, "int32", 3)
        topk = _capi.Tensor()
        _check(_capi.library().m3idx_indexer_forward(
            self._handle, ctypes.byref(args.tensor(q)), ctypes.byref(args.tensor(kv_cache)),
            ctypes.byref(decode) if decode else None, ctypes.byref(prefill) if prefill else None,
            self._stream_arg(), ctypes.byref(args.tensor(out)), ctypes.byref(topk), None, None))
        return out

    def plan(self, block_table, seq_lens, query_start_loc, num_decodes=0, decode_query_len=4):
        """A step's metadata checked and planned once (on "cuda" also uploaded, on the current
        stream), for run() of every layer of the step: an m3idx.Plan. Arguments as forward()'s.
        The plan keeps copies of the arrays (the caller may reuse them at once); it may be run from
        several threads and streams."""
        if not self._handle:
            raise Error("plan: the indexer is closed")
        args = self._args()
        decode, prefill = self._metadata(args, block_table, seq_lens, query_start_loc, num_decodes,
                                         decode_query_len)
        handle = ctypes.c_void_p()
        _check(self._lib.m3idx_indexer_plan(self._handle, ctypes.byref(decode) if decode else None,
                                            ctypes.byref(prefill) if prefill else None, self._stream_arg(),
                                            ctypes.byref(handle)))
        return Plan(handle, self._lib)

    def run(self, plan, q, kv_cache, out=None):
        """Top-k block ids, int32 [H, T, 16], of one layer of a planned step (plan()): q uint8
        [T, H, 128] with the plan's T rows, kv_cache uint8 [pages, 9216]; into `out` when given.
        Only checks shapes, binds and launches (on "cuda" on the current stream)."""
        if not isinstance(plan, Plan):
            raise Error(f"plan: expected an m3idx.Plan (Indexer.plan), got {type(plan).__name__}")
        if not plan._handle:
            raise Error("plan: the plan is closed")
        if not self._handle:
            raise Error("run: the indexer is closed")
        try:
            args = self._per_thread.run_args
        except AttributeError:
            args = self._per_thread.run_args = _DecodeArgs()
        torch = self._torch
        if torch is None:
            np_ = _NumpyArgs()
            if out is None:
                out = np_.empty((self.num_index_heads, plan.rows, TOPK_BLOCKS))
            for i, a in ((0, q), (1, kv_cache), (4, out)):
                if not isinstance(a, np_.np.ndarray):
                    raise TypeError(f"{_SLOT_NAMES[i]}: expected a numpy.ndarray (device 'cpu'), "
                                    f"got {type(a).__name__}")
                args.pack_numpy(i, a)
            stream_arg = None
        else:
            if out is None:
                if not isinstance(q, torch.Tensor):
                    raise TypeError(f"q: expected a torch.Tensor (device 'cuda'), got {type(q).__name__}")
                out = torch.empty((self.num_index_heads, plan.rows, TOPK_BLOCKS), dtype=torch.int32, device=q.device)
            # As decode(): a slot that holds the tensor's pointer, shape, strides and dtype already
            # is not packed again (an engine's layers pass the same kv_cache, often the same out).
            packed = args.packed
            for i, a in ((0, q), (1, kv_cache), (4, out)):
                try:
                    key = (a.data_ptr(), a.shape, a.stride(), a.dtype)
                except AttributeError:
                    key = None
                if key is None or key != packed[i]:
                    self._pack_torch(args, i, a, key)
            stream = self._stream()
            if stream != args.stream_key:
                args.stream_key, args.stream_arg = stream, ctypes.c_void_p(stream)
            stream_arg = args.stream_arg
        raw = args.raw
        err = self._run_untyped(self._handle, plan._handle, raw[0], raw[1], stream_arg, raw[4], None, None, None)
        if err:
            _check(err)
        return out

    def _args(self):
        return _NumpyArgs() if self.device_kind == _capi.DEVICE_HOST else _TorchArgs(self.device_index)

    def _stream_arg(self):
        return ctypes.c_void_p(self._stream()) if self._torch is not None else None

    def _metadata(self, args, block_table, seq_lens, query_start_loc, num_decodes, decode_query_len):
        """vLLM's step metadata (requests' block_table, seq_lens, query_start_loc; the first
        num_decodes of decode_query_len rows) as the C ABI's decode and prefill structs (None:
        no such rows); the arrays are kept alive by `args`."""
        np = args.np
        block_table = args.host("block_table", block_table, "int32", 2)
        seq_lens = args.host("seq_lens", seq_lens, "int32", 1)
        query_start_loc = args.host("query_start_loc", query_start_loc, "int32", 1)
        R = seq_lens.shape[0]
        D, Q = _c_int("num_decodes", num_decodes, 32), _c_int("decode_query_len", decode_query_len, 32)
        if query_start_loc.shape[0] != R + 1:
            raise Error(f"query_start_loc: expected {R + 1} entries (requests + 1), got {query_start_loc.shape[0]}")
        if block_table.shape[0] != R:
            raise Error(f"block_table: expected {R} rows (one per request), got {block_table.shape[0]}")
        if not 0 <= D <= R:
            raise Error(f"num_decodes: expected 0..{R}, got {D}")
        if D and not 1 <= Q <= self.max_decode_query_len:
            raise Error(f"decode_query_len: expected 1..{self.max_decode_query_len} (max_decode_query_len), got {Q}")
        if D > self.max_num_decodes:
            raise Error(f"num_decodes: expected at most {self.max_num_decodes} (max_num_decodes), got {D}")
        if int(query_start_loc[0]) != 0 or int(query_start_loc[D]) != D * Q:
            raise Error(f"query_start_loc: expected [0] == 0 and [{D}] == {D * Q} ({D} decode requests of "
                        f"{Q} rows first), got {int(query_start_loc[0])} and {int(query_start_loc[D])}")
        decode = prefill = None
        if D:
            decode = _capi.DecodeMetadata()
            decode.block_table = args.tensor(block_table[:D])
            decode.seq_lens = args.tensor(seq_lens[:D])
            decode.decode_query_len = Q
            decode.max_seq_len = int(seq_lens[:D].max())
        if D < R:
            qsl = (query_start_loc[D:] - query_start_loc[D]).astype(np.int32)
            prefill = _capi.PrefillMetadata()
            prefill.block_table = args.tensor(block_table[D:])
            prefill.query_start_loc = args.tensor(qsl)
            prefill.seq_lens = args.tensor(seq_lens[D:])
            prefill.max_query_len = int(np.diff(qsl).max())
            prefill.max_seq_len = int(seq_lens[D:].max())
        return decode, prefill

    def decode(self, q, kv_cache, block_table, seq_lens, out=None, workspace=None):
        """Top-k block ids, int32 [H, D x Q, 16], of a decode step whose metadata stays on the
        device: seq_lens int32 [D] (0: a padding request, all -1), block_table int32 [D, M] (rows
        may be a strided slice), q uint8 [D x Q, H, 128] (Q <= max_decode_query_len), D <=
        max_num_decodes. Graph-safe on "cuda": no host read of the metadata, no synchronisation,
        allocation (besides `out` when not given) or copy, so it can be captured by
        torch.cuda.graph and runs under torch.compile (as torch.ops.m3idx.decode). Bad values are
        found on the device: the request's rows get -1 and status() / check() report them.
        `workspace`: a decode workspace (new_workspace()), else the indexer's own (the class
        docstring gives the stream rules); the result is always `out` or a new tensor."""
        torch = self._torch
        if torch is not None and torch.compiler.is_compiling():
            ops = torch.ops.m3idx
            if out is None:
                if workspace is None:
                    return ops.decode(self._op_id, q, kv_cache, block_table, seq_lens)
                return ops.decode_ws(self._op_id, q, kv_cache, block_table, seq_lens, workspace)
            if workspace is None:
                ops.decode_out(self._op_id, q, kv_cache, block_table, seq_lens, out)
            else:
                ops.decode_out_ws(self._op_id, q, kv_cache, block_table, seq_lens, out, workspace)
            return out
        return self._decode_now(q, kv_cache, block_table, seq_lens, out, workspace)

    def _decode_now(self, q, kv_cache, block_table, seq_lens, out, workspace=None):
        if not self._handle:
            raise Error("decode: the indexer is closed")
        try:
            args = self._per_thread.args
        except AttributeError:
            args = self._per_thread.args = _DecodeArgs()
        torch = self._torch
        if torch is None:
            np_ = _NumpyArgs()
            names = ("q", "kv_cache", "block_table", "seq_lens")
            for name, a in zip(names, (q, kv_cache, block_table, seq_lens)):
                if not isinstance(a, np_.np.ndarray):
                    raise TypeError(f"{name}: expected a numpy.ndarray (device 'cpu'), got {type(a).__name__}")
            if out is None:
                out = np_.empty((self.num_index_heads, q.shape[0] if q.ndim else 0, TOPK_BLOCKS))
            elif not isinstance(out, np_.np.ndarray):
                raise TypeError(f"out: expected a numpy.ndarray (device 'cpu'), got {type(out).__name__}")
            if workspace is not None and not isinstance(workspace, np_.np.ndarray):
                raise TypeError(f"workspace: expected a numpy.ndarray (device 'cpu'), got {type(workspace).__name__}")
            tensors = (q, kv_cache, block_table, seq_lens, out) + ((workspace,) if workspace is not None else ())
            for i, a in enumerate(tensors):
                args.pack_numpy(i, a)
        else:
            if out is None:
                if not isinstance(q, torch.Tensor):
                    raise TypeError(f"q: expected a torch.Tensor (device 'cuda'), got {type(q).__name__}")
                out = torch.empty((self.num_index_heads, q.shape[0] if q.dim() else 0, TOPK_BLOCKS),
                                  dtype=torch.int32, device=q.device)
            # An engine passes the same kv_cache, block table and seq_lens to every layer of a step,
            # and its q and out usually reuse one allocation: a slot whose tensor has the data
            # pointer, shape, strides and dtype it holds (what the packed struct says; under UVA a
            # pointer names its device) is not packed again. Inline, as calls per tensor were a
            # fifth of the call's time; the library checks what the slots hold.
            packed = args.packed
            tensors = (q, kv_cache, block_table, seq_lens, out) if workspace is None else \
                (q, kv_cache, block_table, seq_lens, out, workspace)
            i = 0
            try:
                for a in tensors:
                    key = (a.data_ptr(), a.shape, a.stride(), a.dtype)
                    if key != packed[i]:
                        self._pack_torch(args, i, a, key)
                    i += 1
            except AttributeError:
                self._pack_torch(args, i, tensors[i], None)  # raises, naming it
            stream = self._stream()
            if stream != args.stream_key:
                args.stream_key, args.stream_arg = stream, ctypes.c_void_p(stream)
        raw = args.raw
        err = self._decode_untyped(self._handle, raw[0], raw[1], raw[2], raw[3], args.stream_arg, raw[4], None,
                                   None if workspace is None else raw[5])
        if err:
            _check(err)
        return out

    def _pack_torch(self, args, i, a, key):
        """Tensor `a` as m3idx_tensor i of this thread's decode buffer `args` (`key`: its (data_ptr,
        shape, stride, dtype), None when it is not a tensor); the library checks what it holds."""
        name = _SLOT_NAMES[i]
        try:
            if key is None:
                raise AttributeError
            ptr, shape, stride, dtype = key
            n = len(shape)
            device = a.get_device()
            _TENSOR.pack_into(args.buf, i * _TENSOR.size, ptr, _TORCH_DTYPES[dtype], n, *shape,
                              *_PAD[n], *stride, *_PAD[n], _capi.DEVICE_CUDA if device >= 0 else _capi.DEVICE_HOST,
                              device if device >= 0 else 0)
            args.packed[i] = key
        except (KeyError, AttributeError, IndexError, TypeError):
            args.packed[i] = None
            if not isinstance(a, self._torch.Tensor):
                raise TypeError(f"{name}: expected a torch.Tensor (device 'cuda'), got {type(a).__name__}") from None
            if a.dim() > 4:
                raise Error(f"{name}: tensor of {a.dim()} dimensions (at most 4)") from None
            raise Error(f"{name}: expected dtype torch.{'uint8' if i in (0, 1, 5) else 'int32'}, got {a.dtype}") from None

    def status(self, clear=True):
        """(seq_lens word, block_table word) of decode()'s device checks since the last clear,
        after waiting for the current stream: 0 each when nothing was found (include/m3idx/
        Indexer.h, DeviceStatus, gives their bits)."""
        a, b = ctypes.c_int64(), ctypes.c_int64()
        _check(self._lib.m3idx_indexer_read_status(self._handle, self._current_stream(), 1 if clear else 0,
                                                   ctypes.byref(a), ctypes.byref(b)))
        return a.value, b.value

    def check(self):
        """Raises m3idx.Error naming the bad seq_len / page id decode() found on the device since the
        last check (waiting for the current stream), and clears the status."""
        _check(self._lib.m3idx_indexer_check_status(self._handle, self._current_stream()))

    def _current_stream(self):
        return self._stream() if self._torch is not None else None


class Plan(_Closing):
    """One step's metadata as Indexer.plan() checked and planned it, for Indexer.run() of every
    layer of the step. Immutable; freed by close() or when dropped (runs queued already are
    unaffected). `rows`: the q rows a run takes."""

    def __init__(self, handle, lib):
        self._handle = handle
        self._lib = lib
        self.rows = int(lib.m3idx_plan_rows(handle))

    def close(self):
        if self._handle:
            self._lib.m3idx_plan_destroy(self._handle)
            self._handle = None


class DecodeCp(_Closing):
    """Decode context parallelism across the processes of a tensor-parallel group on one host
    (SPEC §6; vLLM's init_rocm_nvfp4_indexer_decode_cp(max_model_len)): one a process, shared by
    its indexers (one a layer). Collectively, on every rank's process:

        cp = m3idx.DecodeCp.init(max_model_len, group=tp_group)  # torch.distributed group (None: world)
        idx = m3idx.Indexer(num_index_heads=1, device="cuda", decode_cp=cp)  # each layer's

    init names the group with rank 0's random bytes, shares the name through the group's
    all-gather, and the ranks' device memory becomes one array (driver shareable memory,
    descriptors over Unix sockets): receive buffers of 256 x 4 rows by max_model_len's score width
    (32 MiB at 1M tokens) and the gathered queries. DecodeCp(name, rank, world, ...) is the same
    without torch.distributed (the caller shares the name). Every rank must run its layers' CP
    steps in the same order, one after another on the device (Indexer.h's DecodeCp says why)."""

    def __init__(self, group_name, rank, world, max_model_len=1 << 20, device="cuda", timeout_s=60.0):
        self._handle = None  # first: __del__ runs even when construction fails
        kind, index = _parse_device(device)
        handle = ctypes.c_void_p()
        _check(_capi.library().m3idx_decode_cp_create(
            str(group_name).encode(), _c_int("rank", rank, 32), _c_int("world", world, 32),
            _c_int("max_model_len", max_model_len, 64), kind, index,
            _c_int("timeout_s", int(timeout_s * 1000), 32), ctypes.byref(handle)))
        self._handle = handle
        self.name, self.rank, self.world, self.max_model_len = str(group_name), int(rank), int(world), int(max_model_len)

    @classmethod
    def init(cls, max_model_len, group=None, device=None, timeout_s=60.0):
        """Collective over torch.distributed's `group`; device: this rank's GPU (None: torch's current)."""
        import os
        import torch
        import torch.distributed as dist
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        names = [None] * world
        dist.all_gather_object(names, "m3idx-cp-" + os.urandom(8).hex(), group=group)
        if device is None:
            device = f"cuda:{torch.cuda.current_device()}"
        return cls(names[0], rank, world, max_model_len, device, timeout_s)

    def departed_rank(self):
        """The first peer seen to leave the group (its process ended), or None."""
        r = _capi.library().m3idx_decode_cp_departed_rank(self._open_handle("departed_rank"))
        return None if r < 0 else int(r)

    def _open_handle(self, what):
        if not self._handle:
            raise Error(f"{what}: the DecodeCp is closed")
        return self._handle

    def close(self):
        """Drops this handle; the group's memory lives while an indexer that joined it does."""
        if self._handle:
            _capi.library().m3idx_decode_cp_destroy(self._handle)
            self._handle = None
