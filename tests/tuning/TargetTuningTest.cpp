// The tuning tables: each target's configs and grids, configs named by every field that changes
// the code, shapes a kernel cannot take refused by name, and an unknown target named.
#include <gtest/gtest.h>

#include "kernels_src/KernelCatalog.h"
#include "tuning/TargetTuning.h"

using namespace m3idx::kernels;
using m3idx::tuning::TargetTuning;

namespace {

const TargetTuning &host() { return m3idx::tuning::hostTuning(); }
const TargetTuning &sm90() { return **m3idx::tuning::tuningFor("sm_90"); }
const TargetTuning &gfx950() { return **m3idx::tuning::tuningFor("gfx950"); }

} // namespace

// Configs name what changes the code: warpgroup prefill configs say so (their PTX files and cache
// keys differ), others keep their names; shapes a kernel cannot take are refused by name.
TEST(KernelConfig, NamesAndValidation) {
  EXPECT_EQ(host().configFor(KernelKind::ScoreDecode, 4, 4).str(), "heads=4,rows=4,unroll=4");
  EXPECT_EQ(host().configFor(KernelKind::ScorePrefill, 1, 4).str(), "heads=1,rows=16,unroll=4,narrow");
  EXPECT_EQ(host().configFor(KernelKind::TopkDecode, 4, 8).str(), "heads=1,rows=8");
  EXPECT_EQ(sm90().configFor(KernelKind::ScorePrefill, 2, 4).str(),
            "heads=2,rows=64,tokens=64,warps=4,fold,unroll=4,narrow");
  KernelConfig c = host().configFor(KernelKind::ScorePrefill, 1, 4);
  c.tokenTile = 48;
  auto k = buildKernel(KernelKind::ScorePrefill, c);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("token tile"), std::string::npos) << k.status().message();
  c = host().configFor(KernelKind::TopkDecode, 1, 4);
  c.warps = 4;
  k = buildKernel(KernelKind::TopkDecode, c);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("warps"), std::string::npos) << k.status().message();
  k = buildKernel(KernelKind::ScorePrefill, sm90().configFor(KernelKind::ScorePrefill, 4, 4));
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->warps, 4);
  EXPECT_NE(k->print().find("warps=4"), std::string::npos);
  c = host().configFor(KernelKind::ScorePrefill, 1, 4); // folding needs token tiles of whole 16s
  c.foldTokenPairs = true;
  c.tokenTile = 8;
  k = buildKernel(KernelKind::ScorePrefill, c);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("token-pair folding"), std::string::npos) << k.status().message();
  c = host().configFor(KernelKind::TopkPrefill, 1, 4);
  c.foldTokenPairs = true;
  EXPECT_FALSE(buildKernel(KernelKind::TopkPrefill, c).ok());
}

// sm_90 prefill programs are a warpgroup of 128 columns; host and gfx950 ones one 16-column tile
// with the decode grid's sizes; a step's tuning carries every kernel's config.
TEST(TargetTuning, TablesPerTarget) {
  EXPECT_EQ(sm90().prefill.warps, 4);
  EXPECT_EQ(sm90().prefillRowTile(2), 64);
  EXPECT_EQ(host().prefillRowTile(1), 16);
  EXPECT_EQ(host().prefillRowTile(4), 4);
  EXPECT_EQ(host().prefill.maxBlocksPerProgram, host().decodeMaxBlocksPerProgram);
  EXPECT_EQ(gfx950().prefill.programs, gfx950().decodeScorePrograms);
  EXPECT_LT(host().decodeScorePrograms, gfx950().decodeScorePrograms);
  const StepTuning s = sm90().forStep(4, 8, TargetTuning::kLargeStep);
  for (KernelKind k : allKernels())
    EXPECT_EQ(s.config(k), sm90().configFor(k, 4, 8)) << kernelName(k);
  EXPECT_EQ(s.prefillScorePrograms, sm90().prefill.programs);
  EXPECT_FALSE(sm90().configFor(KernelKind::ScoreDecode, 1, 4).narrowMask);
  EXPECT_TRUE(sm90().configFor(KernelKind::ScorePrefill, 1, 4).narrowMask);
}

TEST(TargetTuning, UnknownTargetIsNamed) {
  auto t = m3idx::tuning::tuningFor("sm_80");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("sm_80"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("host, sm_90, gfx950"), std::string::npos) << t.status().message();
}

// The mask forms compute the same scores (HostBackendTest runs both against the reference); here:
// configs that differ in a field are distinct kernels, and a top-k kernel refuses score-only fields.
TEST(KernelConfig, MaskFormAndUnrollAreConfigFields) {
  KernelConfig decode = host().configFor(KernelKind::ScoreDecode, 1, 4);
  KernelConfig narrow = decode;
  narrow.narrowMask = true;
  EXPECT_NE(decode, narrow);
  EXPECT_NE(decode.str(), narrow.str());
  auto a = buildKernel(KernelKind::ScoreDecode, decode), b = buildKernel(KernelKind::ScoreDecode, narrow);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->print(), b->print());
  KernelConfig topk = host().configFor(KernelKind::TopkDecode, 1, 4);
  topk.blockUnroll = 2;
  EXPECT_FALSE(buildKernel(KernelKind::TopkDecode, topk).ok());
  topk.blockUnroll = 1;
  topk.narrowMask = true;
  EXPECT_FALSE(buildKernel(KernelKind::TopkDecode, topk).ok());
  topk.narrowMask = false;
  topk.tilesAhead = 2;
  EXPECT_FALSE(buildKernel(KernelKind::TopkDecode, topk).ok());
}

// sm_90's decode forms by a program's columns: 8 columns carry two key tiles ahead, 16 run on half
// the grid target, 24 and 32 (6 and 8 rows x 4 heads) as one warpgroup on a quarter of it, 12 and
// 20 (not a multiple of wgmma's 8) as before; the host takes the defaults; the scratch for program
// flags is sized by the largest target.
TEST(TargetTuning, DecodeFormsFollowAProgramsColumns) {
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 1, 4).tilesAhead, 1);
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 1, 8).tilesAhead, 2);
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 2, 4).str(), "heads=2,rows=4,unroll=4,ahead=2");
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 4, 4).tilesAhead, 1);
  EXPECT_EQ(sm90().forStep(1, 4, TargetTuning::kLargeStep).decodeScorePrograms, sm90().decodeScorePrograms);
  EXPECT_EQ(sm90().forStep(4, 4, TargetTuning::kLargeStep).decodeScorePrograms, 8192);
  EXPECT_EQ(sm90().forStep(4, 8, TargetTuning::kLargeStep).decodeScorePrograms, sm90().decodeWarpgroupPrograms);
  EXPECT_EQ(sm90().forStep(4, 6, TargetTuning::kLargeStep).decodeScorePrograms, sm90().decodeWarpgroupPrograms);
  // one-warp programs spread a step over 2048 of the grid's; warpgroups and the host over theirs
  EXPECT_EQ(sm90().forStep(1, 4, TargetTuning::kLargeStep).decodeActivePrograms, 2048);
  EXPECT_EQ(sm90().forStep(4, 4, TargetTuning::kLargeStep).decodeActivePrograms, 2048);
  EXPECT_EQ(sm90().forStep(4, 8, TargetTuning::kLargeStep).decodeActivePrograms, sm90().decodeWarpgroupPrograms);
  EXPECT_EQ(host().forStep(1, 4, TargetTuning::kLargeStep).decodeActivePrograms, host().decodeScorePrograms);
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 4, 8).str(),
            "heads=4,rows=8,tokens=64,warps=4,fold,unroll=4,narrow");
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 4, 6).warps, 4);
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 4, 5).str(), "heads=4,rows=5,unroll=4,narrow");
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 4, 3).warps, 1);
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 2, 8).warps, 1); // 16 columns
  EXPECT_EQ(sm90().mostDecodeScorePrograms(), sm90().decodeScorePrograms);
  TargetTuning wider = sm90();
  wider.decodeForms.push_back({32, 4 * wider.decodeScorePrograms, 1});
  EXPECT_EQ(wider.mostDecodeScorePrograms(), 4 * wider.decodeScorePrograms);
  EXPECT_EQ(host().forStep(4, 4, TargetTuning::kLargeStep).decodeScorePrograms, host().decodeScorePrograms);
  EXPECT_EQ(host().configFor(KernelKind::ScoreDecode, 1, 8).tilesAhead, 1);
  EXPECT_EQ(host().configFor(KernelKind::ScoreDecode, 4, 8).warps, 1);
  TargetTuning grids = sm90();
  grids.decodeWarpgroupPrograms = 2 * grids.decodeScorePrograms;
  EXPECT_EQ(grids.mostDecodeScorePrograms(), 2 * grids.decodeScorePrograms);
}

// Tiles in flight shape the score loop (more loop-carried tiles), up to a block's tiles.
TEST(KernelConfig, TilesAheadAreAScoreField) {
  KernelConfig decode = host().configFor(KernelKind::ScoreDecode, 1, 4), ahead = decode;
  ahead.tilesAhead = 2;
  EXPECT_EQ(ahead.str(), decode.str() + ",ahead=2");
  auto a = buildKernel(KernelKind::ScoreDecode, decode), b = buildKernel(KernelKind::ScoreDecode, ahead);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->print(), b->print());
  ahead.tilesAhead = 128 / decode.tokenTile;
  EXPECT_TRUE(buildKernel(KernelKind::ScoreDecode, ahead).ok());
  for (int bad : {0, 128 / decode.tokenTile + 1}) {
    ahead.tilesAhead = bad;
    auto k = buildKernel(KernelKind::ScoreDecode, ahead);
    ASSERT_FALSE(k.ok());
    EXPECT_NE(k.status().message().find("tiles ahead"), std::string::npos) << k.status().message();
  }
}

// Staged keys are a score_prefill field (a table's prefill form sets it): named in the config,
// another program (a staged loop), 2 to 8 stages, nothing else takes them.
TEST(KernelConfig, KeyStagesAreAPrefillScoreField) {
  TargetTuning staged = sm90();
  staged.prefill.keyStages = 3;
  const KernelConfig plain = sm90().configFor(KernelKind::ScorePrefill, 1, 4);
  KernelConfig c = staged.configFor(KernelKind::ScorePrefill, 1, 4);
  EXPECT_EQ(c.str(), plain.str() + ",stages=3");
  auto a = buildKernel(KernelKind::ScorePrefill, plain), b = buildKernel(KernelKind::ScorePrefill, c);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->print().find(" stage "), std::string::npos);
  EXPECT_NE(b->print().find("stage stages=3"), std::string::npos);
  for (int bad : {1, 9}) {
    c.keyStages = bad;
    auto k = buildKernel(KernelKind::ScorePrefill, c);
    ASSERT_FALSE(k.ok());
    EXPECT_NE(k.status().message().find("key stages"), std::string::npos) << k.status().message();
  }
  KernelConfig decode = sm90().configFor(KernelKind::ScoreDecode, 1, 4);
  decode.keyStages = 2;
  EXPECT_FALSE(buildKernel(KernelKind::ScoreDecode, decode).ok());
}

// A table may cap a decode program's columns: wider requests go as row tiles (a config field,
// named; 6 rows of 4 heads as tiles of 4 and 2); sm_90 without warpgroups keeps up to 24 columns in
// one program, compares masks in i32 above 16 and splits 8 rows x 4 heads into tiles of 4; the host
// keeps every row in one program. A row tile is only a decode score field, below the rows.
TEST(TargetTuning, WideDecodeRequestsMaySplitIntoRowTiles) {
  TargetTuning tiled = sm90(), warps1 = sm90();
  warps1.decodeWarpgroupAbove = tiled.decodeWarpgroupAbove = 1 << 30;
  tiled.decodeMaxColumns = 16;
  EXPECT_EQ(tiled.configFor(KernelKind::ScoreDecode, 4, 8).str(), "heads=4,rows=8,unroll=4,tile=4");
  EXPECT_EQ(tiled.configFor(KernelKind::ScoreDecode, 4, 8).decodeRowTiles(), 2);
  EXPECT_EQ(tiled.configFor(KernelKind::ScoreDecode, 4, 6).decodeRowTiles(), 2);
  EXPECT_EQ(tiled.configFor(KernelKind::ScoreDecode, 4, 4).rowTile, 0);
  EXPECT_EQ(tiled.configFor(KernelKind::ScoreDecode, 2, 8).rowTile, 0);
  EXPECT_EQ(warps1.configFor(KernelKind::ScoreDecode, 4, 8).str(), "heads=4,rows=8,unroll=4,tile=4");
  EXPECT_EQ(warps1.configFor(KernelKind::ScoreDecode, 4, 6).str(), "heads=4,rows=6,unroll=4,narrow");
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 2, 8).str(), "heads=2,rows=8,unroll=4");
  EXPECT_EQ(host().configFor(KernelKind::ScoreDecode, 4, 8).rowTile, 0);
  KernelConfig topk = host().configFor(KernelKind::TopkDecode, 1, 8);
  topk.rowTile = 4;
  EXPECT_FALSE(buildKernel(KernelKind::TopkDecode, topk).ok());
  KernelConfig wide = tiled.configFor(KernelKind::ScoreDecode, 4, 8);
  wide.rowTile = 8;
  EXPECT_FALSE(buildKernel(KernelKind::ScoreDecode, wide).ok()); // queryRows itself
  wide.rowTile = 65;
  EXPECT_FALSE(buildKernel(KernelKind::ScoreDecode, wide).ok()); // past the rows a decode may have
}

// With decodeWarpgroupPad a request of columns no multiple of 8 is one warpgroup program whose row
// tile is padded to the next multiple of 8 columns; without it such requests stay one warp.
TEST(TargetTuning, WarpgroupsMayPadTheirRows) {
  TargetTuning padded = sm90();
  padded.decodeWarpgroupAbove = 0;
  padded.decodeWarpgroupPad = true;
  const KernelConfig c14 = padded.configFor(KernelKind::ScoreDecode, 1, 4), c43 = padded.configFor(KernelKind::ScoreDecode, 4, 3);
  EXPECT_EQ(c14.warps, 4);
  EXPECT_EQ(c14.rowTile, 8);
  EXPECT_EQ(c14.decodeColumns(), 8);
  EXPECT_EQ(c14.decodeRowTiles(), 1);
  EXPECT_EQ(c43.rowTile, 4);
  EXPECT_EQ(c43.decodeColumns(), 16);
  EXPECT_EQ(padded.configFor(KernelKind::ScoreDecode, 2, 4).rowTile, 0); // 8 columns already
  for (int heads : {1, 2, 4})
    for (int rows = 1; rows <= 8; ++rows)
      EXPECT_TRUE(buildKernel(KernelKind::ScoreDecode, padded.configFor(KernelKind::ScoreDecode, heads, rows)).ok())
          << heads << " x " << rows;
  padded.decodeWarpgroupPad = false;
  EXPECT_EQ(padded.configFor(KernelKind::ScoreDecode, 1, 4).warps, 1);
}

// sm_90 scores a step of up to 8 decode requests in padded warpgroups where a request takes up to 16
// columns padded (HostVsReference.MatchesInPaddedWarpgroups's form), wider ones as in larger steps;
// the step's requests choose, and warm-ups and AOT bundles get both forms (configsFor).
TEST(TargetTuning, SmallDecodeStepsRunAsPaddedWarpgroups) {
  TargetTuning padded = sm90();
  padded.decodeWarpgroupAbove = 0;
  padded.decodeWarpgroupPad = true;
  for (int heads : {1, 2, 4})
    for (int rows = 1; rows <= 8; ++rows) {
      const std::string large = sm90().configFor(KernelKind::ScoreDecode, heads, rows).str();
      const KernelConfig small = sm90().configFor(KernelKind::ScoreDecode, heads, rows, 8);
      EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, heads, rows, 9).str(), large);
      const bool narrow = (heads * rows + 7) / 8 * 8 <= TargetTuning::kSmallStepColumns;
      EXPECT_EQ(small.str(), narrow ? padded.configFor(KernelKind::ScoreDecode, heads, rows).str() : large)
          << heads << " x " << rows;
      std::vector<std::string> all;
      for (const KernelConfig &c : sm90().configsFor(KernelKind::ScoreDecode, heads, rows))
        all.push_back(c.str());
      std::vector<std::string> want = {large};
      if (small.str() != large)
        want.push_back(small.str());
      EXPECT_EQ(all, want);
      EXPECT_EQ(host().configsFor(KernelKind::ScoreDecode, heads, rows).size(), 1u);
    }
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 1, 4, 1).warps, 4);
  // small steps' warpgroups spread their blocks over 512 programs of the warpgroups' grid; wide
  // requests' warpgroups over all of it
  EXPECT_EQ(sm90().forStep(1, 4, 8).decodeScorePrograms, sm90().decodeWarpgroupPrograms);
  EXPECT_EQ(sm90().forStep(1, 4, 8).decodeActivePrograms, 512);
  EXPECT_EQ(sm90().forStep(4, 4, 8).decodeActivePrograms, 512);
  EXPECT_EQ(sm90().forStep(4, 8, 8).decodeActivePrograms, sm90().decodeWarpgroupPrograms);
  EXPECT_EQ(sm90().forStep(1, 4, 9).decodeActivePrograms, 2048);
  TargetTuning wholeGrid = sm90();
  wholeGrid.decodeSmallStepActive = 0;
  EXPECT_EQ(wholeGrid.forStep(1, 4, 8).decodeActivePrograms, sm90().decodeWarpgroupPrograms);
  EXPECT_EQ(sm90().configsFor(KernelKind::TopkDecode, 1, 4).size(), 1u);
  // the flag scratch counts the small steps' warpgroup grid where large steps have no warpgroups
  TargetTuning onlySmall = sm90();
  onlySmall.decodeWarpgroupAbove = 1 << 30;
  onlySmall.decodeWarpgroupPrograms = 2 * onlySmall.decodeScorePrograms;
  EXPECT_EQ(onlySmall.mostDecodeScorePrograms(), onlySmall.decodeWarpgroupPrograms);
  onlySmall.decodeWarpgroupRequests = 0;
  EXPECT_EQ(onlySmall.mostDecodeScorePrograms(), onlySmall.decodeScorePrograms);
}

// gfx950's one-program decodes of 12, 14, 20, 24 or 28 columns did not compile (the wave's blocked
// reduction of 16 slots a column): they run in row tiles of a power of two columns, and every
// other request keeps one program.
TEST(TargetTuning, Gfx950SplitsDecodesOfColumnsItsReductionCannotTake) {
  EXPECT_EQ(gfx950().configFor(KernelKind::ScoreDecode, 4, 3).rowTile, 2);  // 12 -> 8
  EXPECT_EQ(gfx950().configFor(KernelKind::ScoreDecode, 4, 6).rowTile, 4);  // 24 -> 16
  EXPECT_EQ(gfx950().configFor(KernelKind::ScoreDecode, 2, 7).rowTile, 4);  // 14 -> 8
  for (int heads : {1, 2, 4})
    for (int rows : {1, 2, 4, 8})
      EXPECT_EQ(gfx950().configFor(KernelKind::ScoreDecode, heads, rows).rowTile, 0) << heads << " x " << rows;
  EXPECT_EQ(sm90().configFor(KernelKind::ScoreDecode, 4, 3).rowTile, 0);
  // That each of them compiles for gfx950: tests/lowering/output_hashes.sh (ctest lowering.output_hashes.gfx950).
}
