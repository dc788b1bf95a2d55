// The score grid policy: runs of blocks per program only while the grid keeps its target number of
// programs, never more than kMaxBlocksPerProgram, and chunks that cover every block.
#include <gtest/gtest.h>

#include "kernels_src/LaunchPlan.h"

using namespace m3idx::kernels;

TEST(ScoreGrid, LongBatchesTakeRunsOfBlocks) {
  ScoreGrid g = scoreGrid(256, 1024, kGpuScorePrograms); // 256 requests x 128K tokens
  EXPECT_EQ(g.blocksPerProgram, 8);
  EXPECT_EQ(g.chunks, 128);
  EXPECT_EQ(g.programs(256), 32768);
  g = scoreGrid(8, 8192, kGpuScorePrograms); // 8 x 1M: 65536 blocks keep 16384 programs
  EXPECT_EQ(g.blocksPerProgram, 4);
  EXPECT_EQ(g.programs(8), 16384);
}

TEST(ScoreGrid, SmallBatchesKeepOneBlockPerProgram) {
  ScoreGrid g = scoreGrid(1, 8192, kGpuScorePrograms); // one 1M-token request: fill the GPU
  EXPECT_EQ(g.blocksPerProgram, 1);
  EXPECT_EQ(g.chunks, 8192);
  g = scoreGrid(3, 0, kHostScorePrograms); // no blocks: one (empty) program per unit
  EXPECT_EQ(g.blocksPerProgram, 1);
  EXPECT_EQ(g.chunks, 1);
}

TEST(ScoreGrid, ChunksCoverEveryBlock) {
  for (int64_t units : {1, 2, 7, 64, 256})
    for (int64_t blocks : {1, 5, 127, 1000, 1563, 8192}) {
      const ScoreGrid g = scoreGrid(units, blocks, kHostScorePrograms);
      EXPECT_GE(g.blocksPerProgram, 1);
      EXPECT_LE(g.blocksPerProgram, kMaxBlocksPerProgram);
      EXPECT_GE(g.chunks * g.blocksPerProgram, blocks) << units << " x " << blocks;
      EXPECT_LT((g.chunks - 1) * g.blocksPerProgram, blocks) << units << " x " << blocks;
    }
}
