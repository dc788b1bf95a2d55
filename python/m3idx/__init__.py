"""m3idx from Python: the MiniMax-M3 lightning indexer over a paged NVFP4 index-K cache.

    import m3idx
    idx = m3idx.Indexer(num_index_heads=1, device="cpu")
    topk = idx.forward(q, kv_cache, block_table, seq_lens, query_start_loc, num_decodes=D)

The package is Python over libm3idx.so's C ABI (ctypes), found inside it (the wheel), next to it
in the archive (lib/libm3idx.so), in a checkout's build/lib/, or at M3IDX_LIBRARY."""
from ._capi import LibraryError, library_path
from ._indexer import DecodeCp, Error, Indexer, Plan

__all__ = ["DecodeCp", "Error", "Indexer", "LibraryError", "Plan", "library_path"]
