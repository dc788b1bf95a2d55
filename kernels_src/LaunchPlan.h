// What every backend derives from a step to launch the kernels the same way: the score grids'
// block extent, the prefill row-tile table (score_prefill's programs) and per-row block counts
// (topk_prefill's input) -- the metadata builder's part of the work.
#pragma once

#include <cstdint>

#include "core/Batch.h"

namespace m3idx::kernels {

// The most blocks any request in [first, last) has: the block extent of a score grid.
int64_t maxRequestBlocks(const BatchView &b, int64_t first, int64_t last);

// Slots of decode blocks begin, begin + step, ... below `blocks` (a decode-CP rank's share; all
// blocks for begin 0, step 1).
inline int64_t blockSlots(int64_t blocks, int64_t begin, int64_t step) {
  return blocks > begin ? (blocks - begin + step - 1) / step : 0;
}

// A score grid: `units` (decode requests or prefill row tiles) x `chunks` programs, each scoring
// up to blocksPerProgram consecutive blocks of its unit's `blocks` (the most any unit has). Runs of
// blocks share a program's query load and keep its key stream going; the grid keeps at least
// `targetPrograms` programs when there are that many blocks (a GPU needs thousands of warps; the
// host's thread pool a few hundred work items). Runs are at least minBlocksPerProgram long while
// that leaves targetPrograms / 2 programs: longer runs spread a program's fixed cost (its staging)
// over more blocks where the target's programs are costly to start (sm_90's prefill).
inline constexpr int64_t kMaxBlocksPerProgram = 8;
inline constexpr int64_t kGpuScorePrograms = 16384, kHostScorePrograms = 256;
struct ScoreGrid {
  int64_t chunks = 1, blocksPerProgram = 1;
  int64_t programs(int64_t units) const { return units * chunks; }
};
ScoreGrid scoreGrid(int64_t units, int64_t blocks, int64_t targetPrograms,
                    int64_t maxBlocksPerProgram = kMaxBlocksPerProgram, int64_t minBlocksPerProgram = 1);

// Top-k of `rows` (head, row) pairs of up to `blocks` blocks: rows too few to fill the target are
// cut into segments of segmentBlocks (a multiple of the 32-score step, at least 128) whose top 16s
// topk_merge combines; with one segment the top-k kernels write block ids directly. Rows past the
// target keep a program each: programs of 8 or 32 rows (strided, so short and long causal rows
// mix) ran the H200's 4 x 32K prefill top-k in 0.175 / 0.217 ms against 0.165 (bench/RESULTS.md).
inline constexpr int64_t kGpuTopkPrograms = 4096, kHostTopkPrograms = 64, kMinSegmentBlocks = 128;
struct TopkSplit {
  int64_t segments = 1, segmentBlocks = 1;
  int64_t partialKeys(int64_t headRows) const { return segments > 1 ? headRows * segments * 16 : 1; }
};
TopkSplit topkSplit(int64_t rows, int64_t blocks, int64_t targetPrograms);

// Number of prefill row tiles of `rowTile` rows (the score_prefill config's queryRows), and the
// table itself: tile t covers rows [rowBegin[t], + rowTile) of request request[t]. Arrays hold
// prefillTileCount(b, rowTile) entries.
int64_t prefillTileCount(const BatchView &b, int rowTile);
void fillPrefillTiles(const BatchView &b, int rowTile, int32_t *request, int32_t *rowBegin);

// nblk of every prefill row (decode rows are left as they are): rowBlocks holds T entries.
void fillPrefillRowBlocks(const BatchView &b, int32_t *rowBlocks);

} // namespace m3idx::kernels
