// The step plan: launches whose arguments bind by name to every kernel of every target's configs;
// the score grid takes runs of blocks per program only while it keeps its target number of
// programs (chunks covering every block); the top-k cuts rows into segments only when there are
// too few rows to fill the target.
#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "core/Spec.h"
#include "dsl/Divisor.h"
#include "kernels_src/KernelCatalog.h"
#include "kernels_src/LaunchPlan.h"
#include "tests/TestCases.h"
#include "tuning/TargetTuning.h"

using namespace m3idx::kernels;
using m3idx::Status;
using m3idx::tuning::hostTuning;
using m3idx::tuning::TargetTuning;

namespace {

const TargetTuning &sm90() { return **m3idx::tuning::tuningFor("sm_90"); }
const int64_t kGpuScorePrograms = sm90().decodeScorePrograms, kHostScorePrograms = hostTuning().decodeScorePrograms;
const int64_t kMaxBlocksPerProgram = hostTuning().decodeMaxBlocksPerProgram;
const int64_t kGpuTopkPrograms = sm90().topkPrograms, kHostTopkPrograms = hostTuning().topkPrograms;

// A launch's scalar argument `name` (a failure, and -1, where it has none).
int64_t scalar(const Launch &l, const std::string &name) {
  for (const LaunchArg &a : l.args)
    if (!a.isBuffer && name == a.name)
      return a.value;
  ADD_FAILURE() << name;
  return -1;
}

} // namespace

TEST(ScoreGrid, LongBatchesTakeRunsOfBlocks) {
  ScoreGrid g = scoreGrid(256, 1024, kGpuScorePrograms, kMaxBlocksPerProgram); // 256 requests x 128K tokens
  EXPECT_EQ(g.blocksPerProgram, 8);
  EXPECT_EQ(g.chunks, 128);
  EXPECT_EQ(g.programs(256), 32768);
  g = scoreGrid(8, 8192, kGpuScorePrograms, kMaxBlocksPerProgram); // 8 x 1M: 65536 blocks keep 16384 programs
  EXPECT_EQ(g.blocksPerProgram, 4);
  EXPECT_EQ(g.programs(8), 16384);
}

TEST(ScoreGrid, SmallBatchesKeepOneBlockPerProgram) {
  ScoreGrid g = scoreGrid(1, 8192, kGpuScorePrograms, kMaxBlocksPerProgram); // one 1M-token request: fill the GPU
  EXPECT_EQ(g.blocksPerProgram, 1);
  EXPECT_EQ(g.chunks, 8192);
  g = scoreGrid(3, 0, kHostScorePrograms, kMaxBlocksPerProgram); // no blocks: one (empty) program per unit
  EXPECT_EQ(g.blocksPerProgram, 1);
  EXPECT_EQ(g.chunks, 1);
}

TEST(ScoreGrid, ChunksCoverEveryBlock) {
  for (int64_t units : {1, 2, 7, 64, 256})
    for (int64_t blocks : {1, 5, 127, 1000, 1563, 8192}) {
      const ScoreGrid g = scoreGrid(units, blocks, kHostScorePrograms, kMaxBlocksPerProgram);
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
  const m3idx::tuning::PrefillForm f = sm90().prefill;
  auto grid = [&](int64_t units, int64_t blocks) {
    return scoreGrid(units, blocks, f.programs, f.maxBlocksPerProgram, f.minBlocksPerProgram);
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

// Prefill row tiles of any target's size (16 rows on the host and gfx950 at H=1, 128 on sm_90) cover
// every prefill row once, never crossing a request, a request's last rows first; decode rows get none.
TEST(PrefillTiles, EveryPrefillRowInOneTileOfItsRequestLastRowsFirst) {
  m3idx::BatchView b;
  b.params.numHeads = 1;
  b.params.numDecodes = 2;
  b.params.decodeQueryLen = 4;
  const int32_t qsl[] = {0, 4, 8, 9, 79, 208};
  b.queryStartLoc = qsl;
  b.numRequests = 5;
  b.numRows = 208;
  for (const TargetTuning *t : {&hostTuning(), &sm90()}) {
    const int columns = t->prefill.columns, tile = t->prefillRowTile(1);
    const int64_t n = prefillTileCount(b, tile);
    EXPECT_EQ(n, columns == 128 ? 1 + 1 + 2 : 1 + 5 + 9) << columns;
    std::vector<int32_t> request(n), rowBegin(n), seen(208, 0);
    fillPrefillTiles(b, tile, request.data(), rowBegin.data());
    for (int64_t t = 0; t < n; ++t) {
      // requests in order, each one's tiles last rows first (they see the most: longest first)
      if (t > 0 && request[t] == request[t - 1])
        EXPECT_EQ(rowBegin[t], rowBegin[t - 1] - tile) << "tile " << t;
      else if (t > 0)
        EXPECT_GT(request[t], request[t - 1]) << "tile " << t;
      for (int32_t r = rowBegin[t]; r < std::min(rowBegin[t] + tile, qsl[request[t] + 1]); ++r) {
        EXPECT_GE(r, qsl[request[t]]);
        ++seen[r];
      }
    }
    for (int r = 0; r < 208; ++r)
      EXPECT_EQ(seen[r], r < 8 ? 0 : 1) << "row " << r << ", tiles of " << tile;
  }
}

namespace {

// A mixed batch: 2 decode requests of 4 rows (3000 and 9 tokens), prefills of 1, 70 and 129 rows.
m3idx::Case mixedCase(int heads) {
  m3idx::IndexerParams p;
  p.numHeads = heads;
  p.numDecodes = 2;
  p.decodeQueryLen = 4;
  p.localBlocks = 1;
  return m3idx::testing::buildCase(p, {4, 4, 1, 70, 129}, {3000, 9, 1, 500, 40000});
}

} // namespace

// Every launch of every target's plan binds to the kernel it names: each argument the kernel
// declares is given once by name, and none besides (a renamed kernel argument fails here).
TEST(StepPlan, EveryLaunchBindsToItsKernelByName) {
  for (const std::string &target : m3idx::tuning::tunedTargets())
    for (int heads : {1, 2, 4}) {
      const m3idx::Case c = mixedCase(heads);
      const m3idx::BatchView v = c.view();
      const StepTuning t = (**m3idx::tuning::tuningFor(target)).forStep(heads, 4, TargetTuning::kLargeStep);
      auto plan = planStep(v, 320, t);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      std::vector<KernelKind> kinds;
      for (const Launch &l : plan->launches) {
        kinds.push_back(l.kind);
        KernelConfig expected = t.config(l.kind); // score_prefill: the key-image form where planned
        expected.keyImage = l.kind == KernelKind::ScorePrefill && plan->imageBlocks > 0;
        EXPECT_EQ(l.config, expected);
        auto k = buildKernel(l.kind, l.config);
        ASSERT_TRUE(k.ok()) << k.status().message();
        const KernelSignature sig = *signatureOf(l.kind, l.config);
        int buffers = 0, scalars = 0;
        Status s = bindLaunch(
            sig, l,
            [&](StepBuffer role, int64_t elements) {
              ++buffers;
              EXPECT_GT(elements, 0) << stepBufferName(role);
            },
            [&](int64_t) { ++scalars; });
        ASSERT_TRUE(s.ok()) << target << ": " << s.message();
        EXPECT_EQ(buffers, static_cast<int>(sig.buffers.size()));
        EXPECT_EQ(scalars, static_cast<int>(sig.scalars.size()));
        // the top-k kernels read what the score kernels wrote only after awaiting them
        const bool topk = l.kind == KernelKind::TopkDecode || l.kind == KernelKind::TopkPrefill;
        EXPECT_EQ(sig.awaitsEarlierGrids, topk) << kernelName(l.kind);
      }
      ASSERT_GE(kinds.size(), 4u) << target;
      EXPECT_EQ(kinds[0], KernelKind::ScoreDecode);
      const bool image = plan->imageBlocks > 0; // decode_keys first, then the score reading its image
      EXPECT_EQ(image, t.keyImageMinReads > 0 &&
                           keyImageReads(v, plan->rowTile) >= t.keyImageMinReads * keyImageBlocks(v) + t.keyImageLaunchReads);
      EXPECT_EQ(kinds[1], image ? KernelKind::DecodeKeys : KernelKind::ScorePrefill);
      EXPECT_EQ(kinds[image ? 2 : 1], KernelKind::ScorePrefill);
      EXPECT_EQ(plan->prefillTiles, prefillTileCount(v, plan->rowTile));
      EXPECT_EQ(plan->elementsOf(StepBuffer::Scores), heads * v.numRows * 320);
    }
}

// topk_prefill programs take several unsplit rows while the grid keeps topkPrograms programs, at
// most topkPrefillLongRows in a step with a prefill row of more than 32 blocks (topkPrefillRows
// where all are shorter), rounded up to whole trips of the host's 4 rows within that, the last
// program the rest; split rows (segments) keep one a program.
TEST(StepPlan, PrefillTopkProgramsTakeSeveralRows) {
  const m3idx::Case c = mixedCase(2);
  const m3idx::BatchView v = c.view();
  const int64_t prefillRows = v.numRows - int64_t{v.params.numDecodes} * v.params.decodeQueryLen;
  StepTuning t = hostTuning().forStep(2, 4, TargetTuning::kLargeStep);
  auto topkPrefill = [&](int64_t width) {
    auto plan = planStep(v, width, t);
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    for (const Launch &l : plan->launches)
      if (l.kind == KernelKind::TopkPrefill)
        return l;
    ADD_FAILURE() << "no topk_prefill launch";
    return Launch{};
  };
  using Form = std::tuple<int64_t, int64_t, int64_t>; // topkPrograms, topkPrefillRows, rows a program
  for (auto [programs, most, want] :
       {Form{1, 5, 5}, Form{1, 1, 1}, Form{2 * prefillRows, 8, 4}, Form{2 * prefillRows, 3, 3},
        Form{prefillRows / 3, 64, 8}}) {
    t.topkPrograms = programs;
    t.topkPrefillRows = 1000; // mixedCase has a prefill of 40000 tokens: its rows stream
    t.topkPrefillLongRows = most;
    const Launch l = topkPrefill(320);
    EXPECT_EQ(scalar(l, "rows_per_program"), want) << programs << ", " << most;
    EXPECT_EQ(scalar(l, "head_rows"), 2 * prefillRows);
    EXPECT_EQ(l.programs, (2 * prefillRows + want - 1) / want * scalar(l, "segments"));
  }
  // Prefill rows of at most 32 blocks (4096 tokens): topkPrefillRows.
  m3idx::IndexerParams p;
  p.numHeads = 2;
  p.numDecodes = 2;
  p.decodeQueryLen = 4;
  const m3idx::Case shortRows = m3idx::testing::buildCase(p, {4, 4, 70, 129}, {3000, 9, 500, 4096});
  t.topkPrograms = 1;
  t.topkPrefillRows = 7;
  t.topkPrefillLongRows = 3;
  auto shortPlan = planStep(shortRows.view(), 320, t);
  ASSERT_TRUE(shortPlan.ok()) << shortPlan.status().message();
  EXPECT_EQ(scalar(shortPlan->launches.back(), "rows_per_program"), 7);
  t.topkPrograms = 4096; // few long rows: cut into segments, one row a program
  t.topkPrefillRows = 8;
  t.topkPrefillLongRows = 8;
  const Launch l = topkPrefill(4096);
  EXPECT_GT(scalar(l, "segments"), 1);
  EXPECT_EQ(scalar(l, "rows_per_program"), 1);
}

// A prompt step whose row tiles read at least keyImageMinReads x (its prefill requests' blocks) +
// keyImageLaunchReads blocks: decode_keys first, a program an image block, then score_prefill in
// the key-image form, binding the image and each request's first image block instead of the pages
// and the block table; one read fewer and the step reads the pages. The reads are counted here row
// by row (a tile reads what its longest-seeing row sees), and the image's metadata checked entry
// by entry.
TEST(StepPlan, LongPromptStepsDecodeEachBlockOnceIntoTheKeyImage) {
  m3idx::IndexerParams p;
  p.numHeads = 1;
  p.numDecodes = 1;
  p.decodeQueryLen = 4;
  const m3idx::Case c = m3idx::testing::buildCase(p, {4, 300, 1000}, {9000, 700, 1000});
  const m3idx::BatchView v = c.view();
  StepTuning t = hostTuning().forStep(1, 4, TargetTuning::kLargeStep);
  t.fusedTopkMaxBlocks = 0;
  const int rowTile = t.config(KernelKind::ScorePrefill).queryRows;
  int64_t reads = 0;
  for (int64_t r = 1; r < 3; ++r) {
    const int64_t begin = v.queryStartLoc[r], qLen = v.queryStartLoc[r + 1] - begin;
    for (int64_t tile = 0; tile < qLen; tile += rowTile) {
      int64_t most = 0;
      for (int64_t row = tile; row < std::min<int64_t>(tile + rowTile, qLen); ++row)
        most = std::max(most, m3idx::spec::blocksFor(v.seqLens[r] - qLen + row + 1));
      reads += most;
    }
  }
  const int64_t blocks = 6 + 8; // 700 and 1000 tokens
  ASSERT_EQ(keyImageBlocks(v), blocks);
  ASSERT_EQ(keyImageReads(v, rowTile), reads);
  t.keyImageMinReads = 2;
  t.keyImageLaunchReads = reads - 2 * blocks;
  auto plan = planStep(v, 80, t);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  std::vector<KernelKind> kinds;
  for (const Launch &l : plan->launches)
    kinds.push_back(l.kind);
  ASSERT_EQ(kinds, (std::vector{KernelKind::ScoreDecode, KernelKind::DecodeKeys, KernelKind::ScorePrefill,
                                KernelKind::TopkDecode, KernelKind::TopkPrefill}));
  EXPECT_EQ(plan->imageBlocks, blocks);
  EXPECT_EQ(plan->launches[1].programs, blocks);
  const Launch &score = plan->launches[2];
  EXPECT_TRUE(score.config.keyImage);
  std::map<StepBuffer, int64_t> bound;
  ASSERT_TRUE(bindLaunch(*signatureOf(score.kind, score.config), score,
                         [&](StepBuffer role, int64_t elements) { bound[role] = elements; }, [](int64_t) {})
                  .ok());
  EXPECT_EQ(bound[StepBuffer::KeyImage], blocks * kKeyImageBlockBytes);
  EXPECT_EQ(bound[StepBuffer::ImageBase], 3);
  EXPECT_EQ(bound.count(StepBuffer::Kv) + bound.count(StepBuffer::BlockTable), 0u);
  std::vector<int32_t> base(3, -1), pages(blocks, -1);
  fillKeyImage(v, base.data(), pages.data());
  EXPECT_EQ(base[1], 0);
  EXPECT_EQ(base[2], 6);
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t r = i < 6 ? 1 : 2, blk = i < 6 ? i : i - 6;
    EXPECT_EQ(pages[i], v.blockTable[r * v.maxBlocks + blk]) << i;
  }

  t.keyImageLaunchReads += 1;
  auto pages_ = planStep(v, 80, t);
  ASSERT_TRUE(pages_.ok());
  EXPECT_EQ(pages_->imageBlocks, 0);
  EXPECT_EQ(pages_->launches[1].kind, KernelKind::ScorePrefill);
  EXPECT_FALSE(pages_->launches[1].config.keyImage);
}

// A step whose prefill rows all have at most fusedTopkMaxBlocks blocks: score_prefill in the fused
// form on the unfused grid (its row tiles split over programs as before), binding its top-k output
// and a count of arrived programs per row tile, and no topk_prefill launch; one row longer, a table
// without the form, or a plan without the prefill top-k (a CP share's parts) keep the two launches.
TEST(StepPlan, ShortPrefillStepsTopTheirRowsInTheScorePrograms) {
  m3idx::IndexerParams p;
  p.numHeads = 2;
  p.numDecodes = 2;
  p.decodeQueryLen = 4;
  auto kindsOf = [](const StepPlan &plan) {
    std::vector<KernelKind> kinds;
    for (const Launch &l : plan.launches)
      kinds.push_back(l.kind);
    return kinds;
  };
  for (const std::string &target : {std::string("host"), std::string("sm_90")}) {
    StepTuning t = (**m3idx::tuning::tuningFor(target)).forStep(2, 4, TargetTuning::kLargeStep);
    t.fusedTopkMaxBlocks = 16; // the cases below: up to 16 blocks, then one more
    ASSERT_GT(t.fusedTopkTrip, 0) << target;
    const m3idx::Case fits = m3idx::testing::buildCase(p, {4, 4, 70, 300}, {9000, 9, 500, 2048});
    auto plan = planStep(fits.view(), 256, t);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    ASSERT_EQ(kindsOf(*plan), (std::vector{KernelKind::ScoreDecode, KernelKind::ScorePrefill, KernelKind::TopkDecode}))
        << target;
    const Launch &score = plan->launches[1];
    EXPECT_EQ(score.config.fusedTopkTrip, t.fusedTopkTrip);
    const ScoreGrid grid = scoreGrid(plan->prefillTiles, 16, t.prefillScorePrograms, t.prefillMaxBlocksPerProgram,
                                     t.prefillMinBlocksPerProgram);
    EXPECT_GT(grid.chunks, 1) << target; // the form's counts are exercised
    EXPECT_EQ(scalar(score, "grid_chunks"), grid.chunks);
    EXPECT_EQ(scalar(score, "blocks_per_program"), grid.blocksPerProgram);
    EXPECT_EQ(score.programs, grid.programs(plan->prefillTiles));
    int64_t topkElements = 0, arrivalElements = 0;
    Status s = bindLaunch(*signatureOf(score.kind, score.config), score,
                          [&](StepBuffer role, int64_t elements) {
                            if (role == StepBuffer::Topk)
                              topkElements = elements;
                            if (role == StepBuffer::Arrivals)
                              arrivalElements = elements;
                          },
                          [](int64_t) {});
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(topkElements, 2 * fits.view().numRows * 16);
    EXPECT_EQ(arrivalElements, plan->prefillTiles);

    const m3idx::Case longer = m3idx::testing::buildCase(p, {4, 4, 70, 300}, {9000, 9, 500, 2049});
    auto unfused = planStep(longer.view(), 256, t);
    ASSERT_TRUE(unfused.ok());
    EXPECT_EQ(kindsOf(*unfused).back(), KernelKind::TopkPrefill) << target;
    EXPECT_EQ(unfused->launches[1].config.fusedTopkTrip, 0);
    StepTuning without = t;
    without.fusedTopkTrip = 0;
    auto off = planStep(fits.view(), 256, without);
    ASSERT_TRUE(off.ok());
    EXPECT_EQ(kindsOf(*off).back(), KernelKind::TopkPrefill) << target;
    auto scoresOnly = planStep(fits.view(), 256, t, kScoreDecode | kScorePrefill);
    ASSERT_TRUE(scoresOnly.ok());
    EXPECT_EQ(scoresOnly->launches.back().config.fusedTopkTrip, 0) << target;
  }
}

TEST(StepPlan, BindingNamesAMissingOrUnknownArgument) {
  const m3idx::Case c = mixedCase(1);
  auto plan = planStep(c.view(), 320, hostTuning().forStep(1, 4, TargetTuning::kLargeStep));
  ASSERT_TRUE(plan.ok());
  Launch l = plan->launches[0];
  auto signature = signatureOf(l.kind, l.config);
  ASSERT_TRUE(signature.ok()) << signature.status().message();
  const KernelSignature sig = *signature;
  auto noBuffer = [](StepBuffer, int64_t) {};
  auto noScalar = [](int64_t) {};
  Launch renamed = l;
  for (LaunchArg &a : renamed.args)
    if (std::string(a.name) == "grid_chunks")
      a.name = "chunks";
  Status s = bindLaunch(sig, renamed, noBuffer, noScalar);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'chunks'"), std::string::npos) << s.message();
  Launch dropped = l;
  dropped.args.erase(dropped.args.begin()); // q
  s = bindLaunch(sig, dropped, noBuffer, noScalar);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("buffer argument 'q'"), std::string::npos) << s.message();
}

// A divisor argument's word (dsl/Divisor.h) comes from the plan's value of the divisor, in the
// kernel's order right after it; a divisor without a word is an error naming the argument.
TEST(StepPlan, BindingFillsEachDivisorsWordFromItsValue) {
  const m3idx::Case c = mixedCase(1);
  auto plan = planStep(c.view(), 320, hostTuning().forStep(1, 4, TargetTuning::kLargeStep));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  Launch l = plan->launches[0];
  ASSERT_EQ(l.kind, KernelKind::ScoreDecode);
  const KernelSignature sig = *signatureOf(l.kind, l.config);
  auto noBuffer = [](StepBuffer, int64_t) {};
  for (LaunchArg &a : l.args)
    if (std::string(a.name) == "grid_chunks")
      a.value = 12345;
  std::vector<int64_t> scalars;
  Status s = bindLaunch(sig, l, noBuffer, [&](int64_t v) { scalars.push_back(v); });
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(scalars.size(), sig.scalars.size());
  int words = 0;
  for (size_t i = 0; i < sig.scalars.size(); ++i) {
    std::optional<std::string> divisor = m3idx::dsl::divisorOfWordName(sig.scalars[i]);
    if (!divisor)
      continue;
    ++words;
    ASSERT_GT(i, 0u);
    EXPECT_EQ(sig.scalars[i - 1], *divisor);
    EXPECT_EQ(scalars[i], *m3idx::dsl::divisorWord(scalars[i - 1])) << *divisor;
    if (*divisor == "grid_chunks") {
      EXPECT_EQ(scalars[i - 1], 12345);
    }
  }
  EXPECT_EQ(words, 4) << "grid_chunks, block_step, run_units, active_programs";

  for (LaunchArg &a : l.args)
    if (std::string(a.name) == "block_step")
      a.value = 0;
  s = bindLaunch(sig, l, noBuffer, [](int64_t) {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("argument 'block_step': a divisor must be in [1, 2^31), got 0"), std::string::npos)
      << s.message();
}

// Parts: a CP rank's share plans the decode scores only, over its blocks; a share of a batch with
// prefill rows and a bad range are refused by name.
TEST(StepPlan, PartsAndDecodeBlockRanges) {
  m3idx::IndexerParams p;
  p.numDecodes = 3;
  const m3idx::Case c = m3idx::testing::buildCase(p, {4, 4, 4}, {128 * 40, 128 * 3, 128});
  auto share = planStep(c.view(), 64, hostTuning().forStep(1, 4, TargetTuning::kLargeStep), kScoreDecode, {1, 4});
  ASSERT_TRUE(share.ok()) << share.status().message();
  ASSERT_EQ(share->launches.size(), 1u);
  const Launch &l = share->launches[0];
  EXPECT_EQ(l.kind, KernelKind::ScoreDecode);
  for (const LaunchArg &a : l.args) {
    if (std::string(a.name) == "block_begin") {
      EXPECT_EQ(a.value, 1);
    }
    if (std::string(a.name) == "block_step") {
      EXPECT_EQ(a.value, 4);
    }
  }
  auto bad = planStep(c.view(), 64, hostTuning().forStep(1, 4, TargetTuning::kLargeStep), kScoreDecode, {4, 4});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("decode block range"), std::string::npos);
  const m3idx::Case mixed = mixedCase(1);
  auto prefillShare = planStep(mixed.view(), 320, hostTuning().forStep(1, 4, TargetTuning::kLargeStep), kAllParts, {0, 2});
  ASSERT_FALSE(prefillShare.ok());
  EXPECT_NE(prefillShare.status().message().find("prefill rows"), std::string::npos);
}
