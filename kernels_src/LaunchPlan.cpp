#include "kernels_src/LaunchPlan.h"

#include <algorithm>

#include "core/Spec.h"
#include "kernels_src/KernelCatalog.h"

namespace m3idx::kernels {

int64_t maxRequestBlocks(const BatchView &b, int64_t first, int64_t last) {
  int64_t m = 0;
  for (int64_t i = first; i < last; ++i)
    m = std::max<int64_t>(m, spec::blocksFor(b.seqLens[i]));
  return m;
}

ScoreGrid scoreGrid(int64_t units, int64_t blocks, int64_t targetPrograms, int64_t maxBlocksPerProgram,
                    int64_t minBlocksPerProgram) {
  ScoreGrid g;
  blocks = std::max<int64_t>(blocks, 1);
  const int64_t slots = units * blocks;
  const int64_t spread = slots / std::max<int64_t>(targetPrograms, 1);
  const int64_t longer = std::min(minBlocksPerProgram, slots / std::max<int64_t>(targetPrograms / 2, 1));
  g.blocksPerProgram = std::clamp<int64_t>(std::max(spread, longer), 1, maxBlocksPerProgram);
  g.chunks = (blocks + g.blocksPerProgram - 1) / g.blocksPerProgram;
  return g;
}

TopkSplit topkSplit(int64_t rows, int64_t blocks, int64_t targetPrograms) {
  TopkSplit t;
  t.segmentBlocks = std::max<int64_t>(blocks, 1);
  if (rows <= 0 || rows >= targetPrograms || blocks < 2 * kMinSegmentBlocks)
    return t;
  const int64_t wanted = std::min((targetPrograms + rows - 1) / rows, blocks / kMinSegmentBlocks);
  t.segmentBlocks = ((blocks + wanted - 1) / wanted + 31) / 32 * 32;
  t.segments = (blocks + t.segmentBlocks - 1) / t.segmentBlocks;
  return t;
}

int64_t prefillTileCount(const BatchView &b, int rowTile) {
  int64_t tiles = 0;
  for (int64_t i = b.params.numDecodes; i < b.numRequests; ++i)
    tiles += (b.queryStartLoc[i + 1] - b.queryStartLoc[i] + rowTile - 1) / rowTile;
  return tiles;
}

void fillPrefillTiles(const BatchView &b, int rowTile, int32_t *request, int32_t *rowBegin) {
  int64_t t = 0;
  for (int64_t i = b.params.numDecodes; i < b.numRequests; ++i)
    for (int32_t row = b.queryStartLoc[i]; row < b.queryStartLoc[i + 1]; row += rowTile, ++t) {
      request[t] = static_cast<int32_t>(i);
      rowBegin[t] = row;
    }
}

void fillPrefillRowBlocks(const BatchView &b, int32_t *rowBlocks) {
  for (int64_t i = b.params.numDecodes; i < b.numRequests; ++i) {
    const int64_t begin = b.queryStartLoc[i], qLen = b.queryStartLoc[i + 1] - begin;
    for (int64_t r = 0; r < qLen; ++r)
      rowBlocks[begin + r] =
          static_cast<int32_t>(spec::blocksFor(spec::causalLen(b.seqLens[i], qLen, r)));
  }
}

} // namespace m3idx::kernels
