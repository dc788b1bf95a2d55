// What every backend derives from a step to launch the kernels the same way: the score grids'
// block extent, the prefill row-tile table (score_prefill's programs) and per-row block counts
// (topk_prefill's input) -- the metadata builder's part of the work.
#pragma once

#include <cstdint>

#include "core/Batch.h"

namespace m3idx::kernels {

// The most blocks any request in [first, last) has: the block extent of a score grid.
int64_t maxRequestBlocks(const BatchView &b, int64_t first, int64_t last);

// Number of prefill row tiles, and the table itself: tile t covers rows [rowBegin[t],
// + prefillRowTile(heads)) of
// request request[t]. Arrays hold prefillTileCount(b) entries.
int64_t prefillTileCount(const BatchView &b);
void fillPrefillTiles(const BatchView &b, int32_t *request, int32_t *rowBegin);

// nblk of every prefill row (decode rows are left as they are): rowBlocks holds T entries.
void fillPrefillRowBlocks(const BatchView &b, int32_t *rowBlocks);

} // namespace m3idx::kernels
