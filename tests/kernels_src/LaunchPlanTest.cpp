// Launch policies: the score grid takes runs of blocks per program only while it keeps its target
// number of programs (never more than kMaxBlocksPerProgram, chunks covering every block); the
// top-k cuts rows into segments only when there are too few rows to fill the target.
#include <algorithm>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels_src/KernelCatalog.h"
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

// sm_90 prefill programs (a warpgroup that first stages its queries and key table) take up to 64
// blocks while about 2048 programs remain, and at least 16 while 1024 do: 4 x 32K (1024 row tiles
// of 256 blocks) runs 64 per program, 16 x 8K (1024 tiles of 64) 32, 64 x 2K (1024 tiles of 16)
// a tile's 16 in one program (8 under the 2048 alone), 256 x 512 a tile's 4; a lone 4K-token prompt
// (32 tiles of 32 blocks) still spreads one block per program.
TEST(ScoreGrid, WarpgroupPrefillProgramsTakeLongRuns) {
  const PrefillForm f = prefillFormFor("sm_90");
  auto grid = [&](int64_t units, int64_t blocks) {
    return scoreGrid(units, blocks, f.gpuPrograms, f.maxBlocksPerProgram, f.minBlocksPerProgram);
  };
  for (auto [units, blocks, run] : {std::tuple<int64_t, int64_t, int64_t>{1024, 256, 64}, {2048, 256, 64},
                                    {1024, 64, 32}, {1024, 16, 16}, {1024, 4, 4}, {32, 32, 1}, {64, 32, 2}}) {
    const ScoreGrid g = grid(units, blocks);
    EXPECT_EQ(g.blocksPerProgram, run) << units << " x " << blocks;
    EXPECT_EQ(g.chunks, (blocks + run - 1) / run) << units << " x " << blocks;
  }
  for (int64_t units : {1, 9, 300})
    for (int64_t blocks : {1, 77, 8192}) {
      const ScoreGrid g = grid(units, blocks);
      EXPECT_LE(g.blocksPerProgram, 64);
      EXPECT_GE(g.chunks * g.blocksPerProgram, blocks);
    }
  // Host and gfx950 grids are the decode one's.
  EXPECT_EQ(prefillFormFor("host").maxBlocksPerProgram, kMaxBlocksPerProgram);
  EXPECT_EQ(prefillFormFor("gfx950").gpuPrograms, kGpuScorePrograms);
}

// Configs name what changes the code: warpgroup prefill configs say so (their PTX files and cache
// keys differ), others keep their names; shapes a kernel cannot take are refused by name.
TEST(KernelConfig, NamesAndValidation) {
  EXPECT_EQ(configFor(KernelKind::ScoreDecode, 4, 4).str(), "heads=4,rows=4");
  EXPECT_EQ(configFor(KernelKind::ScorePrefill, 1, 4).str(), "heads=1,rows=16");
  EXPECT_EQ(configFor(KernelKind::ScorePrefill, 2, 4, prefillFormFor("sm_90")).str(),
            "heads=2,rows=64,tokens=64,warps=4,fold");
  KernelConfig c = configFor(KernelKind::ScorePrefill, 1, 4);
  c.tokenTile = 48;
  auto k = buildKernel(KernelKind::ScorePrefill, c);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("token tile"), std::string::npos) << k.status().message();
  c = configFor(KernelKind::TopkDecode, 1, 4);
  c.warps = 4;
  k = buildKernel(KernelKind::TopkDecode, c);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("warps"), std::string::npos) << k.status().message();
  k = buildKernel(KernelKind::ScorePrefill, configFor(KernelKind::ScorePrefill, 4, 4, prefillFormFor("sm_90")));
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->warps, 4);
  EXPECT_NE(k->print().find("warps=4"), std::string::npos);
  c = configFor(KernelKind::ScorePrefill, 1, 4); // folding needs token tiles of whole 16s
  c.foldTokenPairs = true;
  c.tokenTile = 8;
  k = buildKernel(KernelKind::ScorePrefill, c);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("token-pair folding"), std::string::npos) << k.status().message();
  c = configFor(KernelKind::TopkPrefill, 1, 4);
  c.foldTokenPairs = true;
  EXPECT_FALSE(buildKernel(KernelKind::TopkPrefill, c).ok());
}

TEST(TopkSplit, FewLongRowsAreCutIntoSegments) {
  TopkSplit s = topkSplit(32, 8192, kGpuTopkPrograms); // 8 requests x 4 rows x 1M tokens
  EXPECT_EQ(s.segments, 64);
  EXPECT_EQ(s.segmentBlocks, 128);
  EXPECT_EQ(s.partialKeys(32), 32 * 64 * 16);
  s = topkSplit(1024, 1024, kGpuTopkPrograms); // 256 x 4 x 128K: 4 x 1024 programs
  EXPECT_EQ(s.segments, 4);
  EXPECT_EQ(s.segmentBlocks, 256);
}

TEST(TopkSplit, ManyOrShortRowsStayWhole) {
  for (auto [rows, blocks] : {std::pair<int64_t, int64_t>{4096, 8192}, {1, 255}, {8, 100}, {0, 8192}}) {
    const TopkSplit s = topkSplit(rows, blocks, kGpuTopkPrograms);
    EXPECT_EQ(s.segments, 1) << rows << " x " << blocks;
    EXPECT_GE(s.segmentBlocks, blocks) << rows << " x " << blocks;
    EXPECT_EQ(s.partialKeys(rows), 1);
  }
}

TEST(TopkSplit, SegmentsCoverTheRowInWholeSteps) {
  for (int64_t rows : {1, 3, 40})
    for (int64_t blocks : {256, 300, 1000, 4097, 8192}) {
      const TopkSplit s = topkSplit(rows, blocks, kHostTopkPrograms);
      EXPECT_EQ(s.segmentBlocks % 32 == 0 || s.segments == 1, true);
      EXPECT_GE(s.segments * s.segmentBlocks, blocks);
      EXPECT_LT((s.segments - 1) * s.segmentBlocks, blocks);
    }
}

TEST(BlockSlots, ARanksShareOfTheBlocks) {
  EXPECT_EQ(blockSlots(1024, 0, 1), 1024);
  EXPECT_EQ(blockSlots(1024, 3, 4), 256); // blocks 3, 7, ..., 1023
  EXPECT_EQ(blockSlots(5, 1, 4), 1);      // block 1 (5 is not below 5)
  EXPECT_EQ(blockSlots(6, 1, 4), 2);      // blocks 1, 5
  EXPECT_EQ(blockSlots(1, 3, 4), 0);
  EXPECT_EQ(blockSlots(0, 0, 1), 0);
}

// Prefill row tiles of any target's size (16 rows on the host and gfx950 at H=1, 64 on sm_90) cover
// every prefill row once, never crossing a request; decode rows get none.
TEST(PrefillTiles, EveryPrefillRowInOneTileOfItsRequest) {
  m3idx::BatchView b;
  b.params.numHeads = 1;
  b.params.numDecodes = 2;
  b.params.decodeQueryLen = 4;
  const int32_t qsl[] = {0, 4, 8, 9, 79, 208};
  b.queryStartLoc = qsl;
  b.numRequests = 5;
  b.numRows = 208;
  for (int columns : {kPrefillForm.columns, prefillFormFor("sm_90").columns}) {
    const int tile = prefillRowTile(1, columns);
    const int64_t n = prefillTileCount(b, tile);
    EXPECT_EQ(n, columns == 128 ? 1 + 1 + 2 : 1 + 5 + 9) << columns;
    std::vector<int32_t> request(n), rowBegin(n), seen(208, 0);
    fillPrefillTiles(b, tile, request.data(), rowBegin.data());
    for (int64_t t = 0; t < n; ++t)
      for (int32_t r = rowBegin[t]; r < std::min(rowBegin[t] + tile, qsl[request[t] + 1]); ++r) {
        EXPECT_GE(r, qsl[request[t]]);
        ++seen[r];
      }
    for (int r = 0; r < 208; ++r)
      EXPECT_EQ(seen[r], r < 8 ? 0 : 1) << "row " << r << ", tiles of " << tile;
  }
}
