"""decode() as PyTorch custom ops, so that torch.compile traces it (with the fake implementations
giving the output's shape) and torch.cuda.graph captures it:

    torch.ops.m3idx.decode(indexer_id, q, kv_cache, block_table, seq_lens) -> int32 [H, T, 16]
    torch.ops.m3idx.decode_out(indexer_id, q, kv_cache, block_table, seq_lens, out)
    torch.ops.m3idx.decode_ws / decode_out_ws(..., workspace): the same in a decode workspace,
    declared mutated (one op each way rather than an Optional mutated argument, which the fake
    tensor pass of torch.compile fails on when it is None).

`indexer_id` names a live cuda Indexer (its decode() passes its own); Indexer.decode routes through
these ops while torch.compile traces and calls the library directly otherwise."""
import torch

from . import _indexer


def _indexer_of(indexer_id):
    ref = _indexer._LIVE.get(indexer_id)
    idx = ref() if ref else None
    if idx is None:
        raise _indexer.Error(f"m3idx::decode: no live Indexer with id {indexer_id}")
    return idx


@torch.library.custom_op("m3idx::decode", mutates_args=())
def decode(indexer_id: int, q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor,
           seq_lens: torch.Tensor) -> torch.Tensor:
    return _indexer_of(indexer_id)._decode_now(q, kv_cache, block_table, seq_lens, None)


@decode.register_fake
def _decode_fake(indexer_id, q, kv_cache, block_table, seq_lens):
    return q.new_empty((q.shape[1], q.shape[0], _indexer.TOPK_BLOCKS), dtype=torch.int32)


@torch.library.custom_op("m3idx::decode_ws", mutates_args=("workspace",))
def decode_ws(indexer_id: int, q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor,
              seq_lens: torch.Tensor, workspace: torch.Tensor) -> torch.Tensor:
    return _indexer_of(indexer_id)._decode_now(q, kv_cache, block_table, seq_lens, None, workspace)


@decode_ws.register_fake
def _decode_ws_fake(indexer_id, q, kv_cache, block_table, seq_lens, workspace):
    return q.new_empty((q.shape[1], q.shape[0], _indexer.TOPK_BLOCKS), dtype=torch.int32)


@torch.library.custom_op("m3idx::decode_out", mutates_args=("out",))
def decode_out(indexer_id: int, q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor,
               seq_lens: torch.Tensor, out: torch.Tensor) -> None:
    _indexer_of(indexer_id)._decode_now(q, kv_cache, block_table, seq_lens, out)


@decode_out.register_fake
def _decode_out_fake(indexer_id, q, kv_cache, block_table, seq_lens, out):
    return None


@torch.library.custom_op("m3idx::decode_out_ws", mutates_args=("out", "workspace"))
def decode_out_ws(indexer_id: int, q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor,
                  seq_lens: torch.Tensor, out: torch.Tensor, workspace: torch.Tensor) -> None:
    _indexer_of(indexer_id)._decode_now(q, kv_cache, block_table, seq_lens, out, workspace)


@decode_out_ws.register_fake
def _decode_out_ws_fake(indexer_id, q, kv_cache, block_table, seq_lens, out, workspace):
    return None
