"""ctypes declarations of include/m3idx/m3idx.h (API version 4), and finding libm3idx.so.

The package is Python over the C ABI, not an extension module: nothing is compiled for a given
CPython, so the same files run on Debian's 3.11 here and the GPU machine's 3.12, next to the
wheel's m3idx/libm3idx.so, the archive's lib/libm3idx.so or a build's build/lib/libm3idx.so."""
import ctypes
import os

API_VERSION = 7

DTYPE_U8, DTYPE_I32, DTYPE_F32 = 0, 1, 2
DEVICE_HOST, DEVICE_CUDA, DEVICE_HIP = 0, 1, 2


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 4), ("strides", ctypes.c_int64 * 4),
                ("device_kind", ctypes.c_int32), ("device_index", ctypes.c_int32)]


class Config(ctypes.Structure):
    _fields_ = [("num_index_heads", ctypes.c_int32), ("index_head_dim", ctypes.c_int32),
                ("sparse_block_size", ctypes.c_int32), ("topk_blocks", ctypes.c_int32),
                ("score_type", ctypes.c_char_p), ("kv_dtype", ctypes.c_char_p),
                ("init_blocks", ctypes.c_int32), ("local_blocks", ctypes.c_int32),
                ("max_model_len", ctypes.c_int64), ("decode_query_len", ctypes.c_int32),
                ("max_num_decodes", ctypes.c_int32), ("max_decode_query_len", ctypes.c_int32),
                ("check_decode_sync", ctypes.c_int32), ("reserve_decode_workspace", ctypes.c_int32)]


class DecodeMetadata(ctypes.Structure):
    _fields_ = [("block_table", Tensor), ("seq_lens", Tensor), ("decode_query_len", ctypes.c_int32),
                ("max_seq_len", ctypes.c_int64), ("device_block_table", Tensor)]


class PrefillMetadata(ctypes.Structure):
    _fields_ = [("block_table", Tensor), ("query_start_loc", Tensor), ("seq_lens", Tensor),
                ("max_query_len", ctypes.c_int64), ("max_seq_len", ctypes.c_int64),
                ("device_block_table", Tensor)]


class LibraryError(RuntimeError):
    """libm3idx.so could not be found or is not the API this package speaks."""


def _candidates():
    env = os.environ.get("M3IDX_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))  # python/m3idx -> the checkout or the archive
    return [os.path.join(here, "libm3idx.so"),                # the wheel: inside the package
            os.path.join(root, "lib", "libm3idx.so"),         # the archive: <root>/lib
            os.path.join(root, "build", "lib", "libm3idx.so")]  # a checkout after ./scripts/test


def _declare(lib):
    P = ctypes.POINTER
    lib.m3idx_api_version.restype = ctypes.c_int32
    lib.m3idx_config_init.argtypes = [P(Config)]
    lib.m3idx_config_init.restype = None
    lib.m3idx_unsupported_reason.argtypes = [P(Config), ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t]
    lib.m3idx_unsupported_reason.restype = ctypes.c_size_t
    lib.m3idx_indexer_create.argtypes = [P(Config), ctypes.c_int32, ctypes.c_int32, P(ctypes.c_void_p)]
    lib.m3idx_indexer_create.restype = ctypes.c_void_p
    lib.m3idx_indexer_destroy.argtypes = [ctypes.c_void_p]
    lib.m3idx_indexer_destroy.restype = None
    lib.m3idx_indexer_warmup.argtypes = [ctypes.c_void_p]
    lib.m3idx_indexer_warmup.restype = ctypes.c_void_p
    lib.m3idx_indexer_forward.argtypes = [ctypes.c_void_p, P(Tensor), P(Tensor), P(DecodeMetadata),
                                          P(PrefillMetadata), ctypes.c_void_p, P(Tensor), P(Tensor),
                                          P(Tensor), P(Tensor)]
    lib.m3idx_indexer_forward.restype = ctypes.c_void_p
    lib.m3idx_indexer_plan.argtypes = [ctypes.c_void_p, P(DecodeMetadata), P(PrefillMetadata), ctypes.c_void_p,
                                       P(ctypes.c_void_p)]
    lib.m3idx_indexer_plan.restype = ctypes.c_void_p
    lib.m3idx_indexer_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, P(Tensor), P(Tensor), ctypes.c_void_p,
                                      P(Tensor), P(Tensor), P(Tensor), P(Tensor)]
    lib.m3idx_indexer_run.restype = ctypes.c_void_p
    lib.m3idx_plan_destroy.argtypes = [ctypes.c_void_p]
    lib.m3idx_plan_destroy.restype = None
    lib.m3idx_plan_rows.argtypes = [ctypes.c_void_p]
    lib.m3idx_plan_rows.restype = ctypes.c_int64
    lib.m3idx_indexer_decode.argtypes = [ctypes.c_void_p, P(Tensor), P(Tensor), P(Tensor), P(Tensor),
                                         ctypes.c_void_p, P(Tensor), P(Tensor), P(Tensor)]
    lib.m3idx_indexer_decode.restype = ctypes.c_void_p
    lib.m3idx_indexer_read_status.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                              P(ctypes.c_int64), P(ctypes.c_int64)]
    lib.m3idx_indexer_read_status.restype = ctypes.c_void_p
    lib.m3idx_indexer_check_status.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.m3idx_indexer_check_status.restype = ctypes.c_void_p
    lib.m3idx_indexer_decode_workspace_bytes.argtypes = [ctypes.c_void_p]
    lib.m3idx_indexer_decode_workspace_bytes.restype = ctypes.c_int64
    lib.m3idx_decode_cp_create.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64,
                                           ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, P(ctypes.c_void_p)]
    lib.m3idx_decode_cp_create.restype = ctypes.c_void_p
    lib.m3idx_decode_cp_destroy.argtypes = [ctypes.c_void_p]
    lib.m3idx_decode_cp_destroy.restype = None
    lib.m3idx_decode_cp_departed_rank.argtypes = [ctypes.c_void_p]
    lib.m3idx_decode_cp_departed_rank.restype = ctypes.c_int32
    lib.m3idx_indexer_join_decode_cp.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.m3idx_indexer_join_decode_cp.restype = ctypes.c_void_p
    lib.m3idx_indexer_decode_cp_active.argtypes = [ctypes.c_void_p]
    lib.m3idx_indexer_decode_cp_active.restype = ctypes.c_int32
    lib.m3idx_indexer_compiles_after_warmup.argtypes = [ctypes.c_void_p]
    lib.m3idx_indexer_compiles_after_warmup.restype = ctypes.c_int64
    lib.m3idx_error_message.argtypes = [ctypes.c_void_p]
    lib.m3idx_error_message.restype = ctypes.c_char_p
    lib.m3idx_error_free.argtypes = [ctypes.c_void_p]
    lib.m3idx_error_free.restype = None


_lib = None
_path = None


def library():
    """The loaded libm3idx.so (M3IDX_LIBRARY, else the wheel's copy in this package, the archive's
    lib/ or the checkout's build/lib/)."""
    global _lib, _path
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        if not os.path.exists(path):
            tried.append(path)
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise LibraryError(f"m3idx: cannot load {path}: {e}") from None
        _declare(lib)
        version = lib.m3idx_api_version()
        if version != API_VERSION:
            raise LibraryError(f"m3idx: {path} has C API version {version}; this package needs {API_VERSION}")
        _lib, _path = lib, path
        return lib
    raise LibraryError("m3idx: libm3idx.so not found (tried " + ", ".join(tried) +
                       "); set M3IDX_LIBRARY, or build with ./scripts/test")


def untyped(lib, name, restype):
    """Another handle on function `name` of `lib`, without argtypes: a caller that passes ctypes
    objects only (c_void_p, None) skips ctypes' per-argument conversions, at the price of matching
    the C signature itself (every argument pointer-sized)."""
    fn = lib._FuncPtr((name, lib))
    fn.restype = restype
    return fn


def library_path():
    library()
    return _path
