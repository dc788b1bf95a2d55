"""m3idx.Indexer: one indexer layer's step (SPEC §4-5) from Python, over the C ABI.

On device "cpu" arrays are NumPy arrays and the host JIT backend runs the step; on "cuda" they are
PyTorch tensors (read in place through data_ptr, no copies of q, kv_cache or the output) and the
step runs on torch.cuda.current_stream()."""
import ctypes

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


class Indexer:
    """The lightning indexer of one layer: per query row and head, the top 16 logical block ids.

    Indexer(num_index_heads=H, init_blocks=I, local_blocks=L, device="cpu" | "cuda",
            max_num_decodes=256, max_decode_query_len=4, max_model_len=1 << 20)

    The kernels of the configured shapes are compiled (or read from the cache) at construction."""

    def __init__(self, num_index_heads=1, init_blocks=0, local_blocks=1, device="cpu",
                 max_num_decodes=256, max_decode_query_len=4, max_model_len=1 << 20, warmup=True):
        self._handle = None  # first: __del__ runs even when construction fails
        lib = _capi.library()
        kind, _, index = str(device).partition(":")
        kinds = {"cpu": _capi.DEVICE_HOST, "cuda": _capi.DEVICE_CUDA}
        if kind not in kinds:
            raise Error(f"device: expected 'cpu' or 'cuda[:N]', got {device!r}")
        if index and not index.isdigit():
            raise Error(f"device: expected 'cpu' or 'cuda[:N]', got {device!r}")
        if not 1 <= int(max_num_decodes) <= 256:
            raise Error(f"max_num_decodes: expected 1..256, got {max_num_decodes}")
        if not 1 <= int(max_decode_query_len) <= 8:
            raise Error(f"max_decode_query_len: expected 1..8, got {max_decode_query_len}")
        self.device_kind = kinds[kind]
        self.device_index = int(index or 0)
        self.num_index_heads = int(num_index_heads)
        self.max_num_decodes = int(max_num_decodes)
        self.max_decode_query_len = int(max_decode_query_len)
        config = _capi.Config()
        lib.m3idx_config_init(ctypes.byref(config))
        config.num_index_heads = self.num_index_heads
        config.init_blocks = int(init_blocks)
        config.local_blocks = int(local_blocks)
        config.max_model_len = int(max_model_len)
        config.decode_query_len = self.max_decode_query_len
        handle = ctypes.c_void_p()
        _check(lib.m3idx_indexer_create(ctypes.byref(config), self.device_kind, self.device_index,
                                        ctypes.byref(handle)))
        self._handle = handle
        if warmup:
            _check(lib.m3idx_indexer_warmup(self._handle))

    def close(self):
        if self._handle:
            _capi.library().m3idx_indexer_destroy(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def compiles_after_warmup(self):
        """Kernels compiled by steps after construction (a shape the warm-up did not cover)."""
        return _capi.library().m3idx_indexer_compiles_after_warmup(self._handle)

    def forward(self, q, kv_cache, block_table, seq_lens, query_start_loc, num_decodes=0,
                decode_query_len=4, out=None):
        """Top-k block ids, int32 [H, T, 16] (-1 past a row's visible blocks), of a step whose
        first num_decodes requests are decodes of decode_query_len rows (SPEC §3 shapes: q uint8
        [T, H, 128], kv_cache uint8 [pages, 9216], block_table int32 [R, M], seq_lens int32 [R],
        query_start_loc int32 [R + 1]). Into `out` when given."""
        if not self._handle:
            raise Error("forward: the indexer is closed")
        args = _NumpyArgs() if self.device_kind == _capi.DEVICE_HOST else _TorchArgs(self.device_index)
        np = args.np
        q = args.array("q", q, "uint8", 3)
        kv_cache = args.array("kv_cache", kv_cache, "uint8", 2)
        block_table = args.host("block_table", block_table, "int32", 2)
        seq_lens = args.host("seq_lens", seq_lens, "int32", 1)
        query_start_loc = args.host("query_start_loc", query_start_loc, "int32", 1)
        R, T, H = seq_lens.shape[0], q.shape[0], self.num_index_heads
        if tuple(q.shape[1:]) != (H, HEAD_DIM) or not args.contiguous(q):
            raise Error(f"q: expected a contiguous [T, {H}, {HEAD_DIM}] tensor, got shape {tuple(q.shape)}"
                        f"{'' if args.contiguous(q) else ' (a strided view)'}")
        if kv_cache.shape[1] != PAGE_BYTES or not args.contiguous(kv_cache):
            raise Error(f"kv_cache: expected a contiguous [pages, {PAGE_BYTES}] tensor, got shape "
                        f"{tuple(kv_cache.shape)}{'' if args.contiguous(kv_cache) else ' (a strided view)'}")
        D, Q = int(num_decodes), int(decode_query_len)
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
        if out is None:
            out = args.empty((H, T, TOPK_BLOCKS))
        else:
            out = args.array("out", out, "int32", 3)
        lib = _capi.library()
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
        stream = None
        if self.device_kind == _capi.DEVICE_CUDA:
            stream = args.torch.cuda.current_stream(self.device_index).cuda_stream
        topk = _capi.Tensor()
        _check(lib.m3idx_indexer_forward(self._handle, ctypes.byref(args.tensor(q)),
                                         ctypes.byref(args.tensor(kv_cache)),
                                         ctypes.byref(decode) if decode else None,
                                         ctypes.byref(prefill) if prefill else None,
                                         ctypes.c_void_p(stream) if stream else None,
                                         ctypes.byref(args.tensor(out)), ctypes.byref(topk), None, None))
        return out
