// The host JIT backend against the scalar reference on generated case families: exact values
// bit for bit (scores and top-k), realistic values within the fp32 summation bound.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "casefile/CaseGenerator.h"
#include "core/Spec.h"
#include "kernels_src/LaunchPlan.h"
#include "reference/ReferenceIndexer.h"
#include "reference/TopkCheck.h"
#include "runtime/HostBackend.h"
#include "tuning/TargetTuning.h"

using namespace m3idx;

namespace {

struct Family {
  const char *name;
  GenOptions options;
};

GenOptions base(uint64_t seed, int heads, int decodes, int prefills) {
  GenOptions o;
  o.seed = seed;
  o.numHeads = heads;
  o.numDecodes = decodes;
  o.numPrefills = prefills;
  o.extraPages = 3;
  return o;
}

std::vector<Family> families() {
  std::vector<Family> f;
  for (ValueMode mode : {ValueMode::Exact, ValueMode::Realistic}) {
    const bool exact = mode == ValueMode::Exact;
    auto add = [&](const char *name, GenOptions o) {
      o.mode = mode;
      f.push_back({name, o});
    };
    GenOptions o = base(exact ? 1 : 2, 4, 5, 0);
    add("decode_h4", o);
    o = base(3, 1, 0, 3);
    o.prefillQueryLen = {1, 70};
    add("prefill_h1", o);
    o = base(4, 2, 3, 2);
    o.initBlocks = 2;
    o.localBlocks = 3;
    add("mixed_h2_init2_local3", o);
    o = base(5, 1, 4, 1);
    o.decodeContext = {0, 6};          // decode rows that see nothing
    o.prefillContext = {1, 130};
    add("short_and_empty_rows", o);
    o = base(6, 2, 3, 1);
    o.decodeQueryLen = 3;
    o.localBlocks = 0;
    o.nanScaleFraction = 0.02;
    add("query_len3_nan_scales", o);
    o = base(7, 1, 2, 0);
    o.decodeContext = {150000, 200000}; // over 1000 blocks: W = 2048
    add("long_context", o);
    o = base(8, 4, 0, 2);
    o.prefillQueryLen = {100, 140};     // many 8-row tiles, the last one partial
    o.prefillContext = {200, 2000};
    add("long_prefill_h4", o);
    o = base(9, 1, 1, 0);
    o.decodeQueryLen = 1;
    add("query_len1", o);
    // 8 and 6 rows x 4 heads: sm_90's row tiles of 16 columns and narrow masks over 24 (and
    // below, each the other way).
    for (auto [name, rows] : {std::pair{"query_len8_h4", 8}, std::pair{"query_len6_h4", 6}}) {
      o = base(10 + rows, 4, 5, 1);
      o.decodeQueryLen = rows;
      o.decodeContext = {0, 2500};
      add(name, o);
    }
  }
  return f;
}

void PrintTo(const Family &f, std::ostream *os) { *os << f.name; }

// Exact values: every score bit for bit (NaN, a block a row does not reach, by class; zeros by
// value) and the same top-k.
void expectSameExactOutput(const IndexerOutput &got, const IndexerOutput &want, const std::string &what) {
  ASSERT_EQ(got.scoreWidth, want.scoreWidth) << what;
  ASSERT_EQ(got.scores.size(), want.scores.size()) << what;
  for (size_t i = 0; i < got.scores.size(); ++i) {
    if (std::isnan(want.scores[i])) {
      ASSERT_TRUE(std::isnan(got.scores[i])) << what << ", score " << i;
      continue;
    }
    ASSERT_EQ(got.scores[i], want.scores[i]) << what << ", score " << i;
  }
  EXPECT_EQ(got.topk, want.topk) << what;
}

// A generated case of exact values through `host`, bit for bit the reference's output.
void expectExactlyTheReference(runtime::HostBackend &host, const GenOptions &o, const std::string &what) {
  StatusOr<Case> c = generateCase(o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  StatusOr<IndexerOutput> got = host.run(c->view(), runtime::RunOptions{true});
  ASSERT_TRUE(got.ok()) << got.status().message();
  StatusOr<IndexerOutput> want = reference::runReference(c->view(), true);
  ASSERT_TRUE(want.ok());
  expectSameExactOutput(*got, *want, what);
}

class HostVsReference : public ::testing::TestWithParam<Family> {
protected:
  void expectMatches(runtime::HostBackend &host);
};

TEST_P(HostVsReference, Matches) {
  runtime::HostBackend host;
  expectMatches(host);
}

// sm_90's prefill programs (128 columns, 64-token tiles, token pairs folded before the running
// max), its warpgroup decode programs (8 and 6 rows x 4 heads: 32 and 24 columns in the same form)
// and its other decode programs are the same kernel source: run here, they must give the same
// answers. These cases have at most 8 decode requests, a small step by sm_90's table: its
// large-step forms are asked for here (its small-step form is MatchesInPaddedWarpgroups's).
TEST_P(HostVsReference, MatchesInSm90Forms) {
  tuning::TargetTuning form = **tuning::tuningFor("sm_90");
  form.decodeWarpgroupRequests = 0;
  runtime::HostBackend host(form);
  expectMatches(host);
}

// score_prefill as a staged loop over whole blocks (KernelConfig::keyStages; sm_90's 128 columns):
// each block decoded by the producer and dotted with every column at once, blocks not seen whole
// by every row masked; the same answers.
TEST_P(HostVsReference, MatchesWithStagedPrefillKeys) {
  tuning::TargetTuning form = **tuning::tuningFor("sm_90");
  form.decodeWarpgroupRequests = 0;
  form.prefill.keyStages = 3;
  runtime::HostBackend host(form);
  expectMatches(host);
}

// The same where the mask decides a score: no local blocks (a row's last block, which the tile's
// rows see in part, keeps its masked max instead of the sentinel), 32-row tiles at 4 heads seen
// whole by none but their first block rows, exact values compared bit for bit. It failed with every
// block a row tile's first row reaches counted as seen whole.
TEST(HostBackend, StagedPrefillKeysMaskWhatRowsDoNotSee) {
  tuning::TargetTuning form = **tuning::tuningFor("sm_90");
  form.prefill.keyStages = 2;
  runtime::HostBackend host(form);
  for (int heads : {1, 4}) {
    GenOptions o = base(31 + heads, heads, 1, 2);
    o.mode = ValueMode::Exact;
    o.localBlocks = 0;
    o.prefillQueryLen = {130, 300};
    o.prefillContext = {140, 700};
    expectExactlyTheReference(host, o, std::to_string(heads) + " heads");
  }
}

// sm_90's table with the other decode forms: no warpgroups, and every request in row tiles of 16
// columns (6 rows x 4 heads as tiles of 4 and 2), or none at all (32 columns with narrow masks).
// One test a form: a long family's case and reference take half a minute on a loaded 2-core machine.
static tuning::TargetTuning otherDecodeForm(int maxColumns) {
  tuning::TargetTuning form = **tuning::tuningFor("sm_90");
  form.decodeWarpgroupAbove = 1 << 30;
  form.decodeWarpgroupRequests = 0;
  form.decodeMaxColumns = maxColumns;
  return form;
}
TEST_P(HostVsReference, MatchesInRowTilesOf16Columns) {
  runtime::HostBackend host(otherDecodeForm(16));
  expectMatches(host);
}
TEST_P(HostVsReference, MatchesWithoutRowTiles) {
  runtime::HostBackend host(otherDecodeForm(0));
  expectMatches(host);
}

// Every decode request as one warpgroup program, a request of columns that are no multiple of 8
// padded with rows that see nothing (4 rows x 1 head as a tile of 8 rows, 3 x 4 as one of 4).
TEST_P(HostVsReference, MatchesInPaddedWarpgroups) {
  tuning::TargetTuning form = **tuning::tuningFor("sm_90");
  form.decodeWarpgroupAbove = 0;
  form.decodeWarpgroupPad = true;
  runtime::HostBackend host(form);
  expectMatches(host);
}

// Decode programs with more key tiles in flight: 3 (loads crossing into the next block from the
// 6th tile on, a count the unroll of 4 does not divide) and a whole block's 8 (row tiles).
static tuning::TargetTuning tilesAheadForm(int ahead, int maxColumns) {
  tuning::TargetTuning form = **tuning::tuningFor("sm_90");
  form.decodeForms.clear();
  form.decodeWarpgroupAbove = 1 << 30;
  form.decodeWarpgroupRequests = 0; // one-warp programs in every step
  form.decodeTilesAhead = ahead;
  form.decodeMaxColumns = maxColumns;
  return form;
}
TEST_P(HostVsReference, MatchesWithThreeTilesAhead) {
  runtime::HostBackend host(tilesAheadForm(3, 24));
  expectMatches(host);
}
TEST_P(HostVsReference, MatchesWithEightTilesAhead) {
  runtime::HostBackend host(tilesAheadForm(8, 16));
  expectMatches(host);
}

void HostVsReference::expectMatches(runtime::HostBackend &host) {
  const Family &fam = GetParam();
  StatusOr<Case> c = generateCase(fam.options);
  ASSERT_TRUE(c.ok()) << c.status().message();
  StatusOr<IndexerOutput> got = host.run(c->view(), runtime::RunOptions{true});
  ASSERT_TRUE(got.ok()) << got.status().message();
  StatusOr<IndexerOutput> want = reference::runReference(c->view(), true);
  ASSERT_TRUE(want.ok());
  ASSERT_EQ(got->scoreWidth, want->scoreWidth);
  ASSERT_EQ(got->scores.size(), want->scores.size());
  if (fam.options.mode == ValueMode::Exact) {
    expectSameExactOutput(*got, *want, fam.name);
  } else {
    reference::CheckReport r = reference::checkTopk(c->view(), got->topk);
    reference::checkScores(c->view(), got->scores, got->scoreWidth, r);
    EXPECT_TRUE(r.ok()) << (r.problems.empty() ? "" : r.problems[0]);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, HostVsReference, ::testing::ValuesIn(families()),
                         [](const auto &info) {
                           return std::string(info.param.options.mode == ValueMode::Exact
                                                  ? "exact_"
                                                  : "realistic_") +
                                  info.param.name;
                         });

// topk_prefill programs of several rows (5 a program: one partial trip of its 32-row tiles; 70:
// two whole trips and a partial one; the last program fewer), on prompts long and short and a
// mixed step.
TEST(HostBackend, PrefillTopkProgramsOfSeveralRowsMatchTheReference) {
  for (int64_t rows : {5, 70}) {
    tuning::TargetTuning form = tuning::hostTuning();
    form.topkPrograms = 1;
    form.topkPrefillRows = rows;
    form.topkPrefillLongRows = rows;
    runtime::HostBackend host(form);
    GenOptions prompts = base(21, 2, 0, 3), mixed = base(22, 4, 3, 2);
    prompts.prefillQueryLen = {30, 300};
    prompts.prefillContext = {1, 6000}; // rows of up to 49 blocks: short and long rows in one program
    for (GenOptions *o : {&prompts, &mixed})
      o->mode = ValueMode::Exact; // every score bit comparable
    for (const GenOptions &o : {prompts, mixed})
      expectExactlyTheReference(host, o, std::to_string(rows) + " rows a program, seed " + std::to_string(o.seed));
  }
}

// Makes `o` exact-valued (every score bit comparable) and plans its case with `form`, as a
// HostBackend of that table will (the plan's launches are what a test checks of the step).
void planExact(const tuning::TargetTuning &form, GenOptions &o, kernels::StepPlan &plan) {
  o.mode = ValueMode::Exact;
  StatusOr<Case> c = generateCase(o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const BatchView v = c->view();
  StatusOr<kernels::StepPlan> planned =
      kernels::planStep(v, 256, form.forStep(v.params.numHeads, v.params.decodeQueryLen, v.params.numDecodes));
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  plan = std::move(*planned);
}

// Steps whose prefill rows all have at most fusedTopkMaxBlocks blocks: the last score_prefill
// program of a row tile to arrive tops its rows (no topk_prefill launch, which the plan is checked
// for; tiles split over several programs, which it is checked for too), in the host's trips of 4
// rows and sm_90's of 128 (its 128 columns, a thread a row): prompts and chunks of up to 2048
// tokens with partial row tiles, and a mixed step, bit for bit the reference, each step twice on
// one backend (a tile's count must be 0 again after it, or the second step's tiles go untopped).
TEST(HostBackend, ShortPromptStepsTopTheirRowsInTheScorePrograms) {
  for (const char *target : {"host", "sm_90"}) {
    tuning::TargetTuning form = **tuning::tuningFor(target);
    form.decodeWarpgroupRequests = 0;
    form.fusedTopkMaxBlocks = 16;
    ASSERT_GT(form.fusedTopkTrip, 0) << target;
    runtime::HostBackend host(form);
    int split = 0; // steps whose row tiles are split over programs
    for (int heads : {1, 2, 4}) {
      GenOptions prompts = base(40 + heads, heads, 0, 3), mixed = base(50 + heads, heads, 2, 2);
      prompts.prefillQueryLen = {1, 300};
      prompts.prefillContext = {1, 2048}; // up to 16 blocks
      mixed.prefillContext = {200, 2048};
      mixed.localBlocks = 1;
      for (GenOptions *o : {&prompts, &mixed}) {
        kernels::StepPlan plan;
        ASSERT_NO_FATAL_FAILURE(planExact(form, *o, plan));
        for (const kernels::Launch &l : plan.launches) {
          ASSERT_NE(l.kind, kernels::KernelKind::TopkPrefill) << target << ": the step was not fused";
          if (l.kind == kernels::KernelKind::ScorePrefill)
            split += l.programs > plan.prefillTiles;
        }
        for (int again = 0; again < 2; ++again)
          expectExactlyTheReference(host, *o, fmt::format("{}, {} heads, seed {}, run {}", target, heads, o->seed, again));
      }
    }
    EXPECT_GT(split, 0) << target;
  }
}

// Steps whose row tiles read their requests' blocks keyImageMinReads times or more decode each
// block once (decode_keys, checked in the plan) and score from the key image, in the host's form
// and sm_90's (64-token tiles loaded as wgmma's A fragments there): prompts, chunks on a context
// and a mixed step, bit for bit the reference; with the threshold out of reach, the same steps
// score from the pages.
TEST(HostBackend, LongPromptStepsScoreFromTheKeyImage) {
  for (const char *target : {"host", "sm_90"}) {
    tuning::TargetTuning form = **tuning::tuningFor(target);
    form.decodeWarpgroupRequests = 0;
    form.fusedTopkMaxBlocks = 0;
    form.keyImageLaunchReads = 0;
    for (int64_t minReads : {int64_t{1}, int64_t{1} << 40}) {
      form.keyImageMinReads = minReads;
      runtime::HostBackend host(form);
      for (int heads : {1, 4}) {
        GenOptions prompts = base(60 + heads, heads, 0, 3), mixed = base(70 + heads, heads, 2, 2);
        prompts.prefillQueryLen = {100, 700};
        prompts.prefillContext = {1, 3000};
        mixed.prefillQueryLen = {1, 200};
        mixed.prefillContext = {1000, 5000};
        mixed.localBlocks = 1;
        for (GenOptions *o : {&prompts, &mixed}) {
          kernels::StepPlan plan;
          ASSERT_NO_FATAL_FAILURE(planExact(form, *o, plan));
          bool decoded = false, fromImage = false;
          for (const kernels::Launch &l : plan.launches) {
            decoded |= l.kind == kernels::KernelKind::DecodeKeys;
            fromImage |= l.kind == kernels::KernelKind::ScorePrefill && l.config.keyImage;
          }
          EXPECT_EQ(decoded, minReads == 1) << target;
          EXPECT_EQ(fromImage, minReads == 1) << target;
          expectExactlyTheReference(host, *o, fmt::format("{}, min reads {}, {} heads, seed {}", target, minReads,
                                                          heads, o->seed));
        }
      }
    }
  }
}

TEST(HostBackend, EmptyBatch) {
  GenOptions o = base(1, 2, 0, 0);
  StatusOr<Case> c = generateCase(o);
  ASSERT_TRUE(c.ok());
  runtime::HostBackend host;
  StatusOr<IndexerOutput> out = host.run(c->view(), {});
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->topk.empty());
}

TEST(HostBackend, CompilesOnceAndReusesKernels) {
  runtime::HostBackend host;
  StatusOr<Case> c = generateCase(base(2, 2, 2, 1));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(host.run(c->view(), {}).ok());
  const size_t kernels = host.kernelRecords().size();
  EXPECT_EQ(kernels, 5u); // score and top-k, decode and prefill, and decode_keys (the prompt reads the image)
  ASSERT_TRUE(host.run(c->view(), {}).ok());
  EXPECT_EQ(host.kernelRecords().size(), kernels);
}

TEST(HostBackend, RejectsInvalidBatchBeforeLaunching) {
  StatusOr<Case> c = generateCase(base(2, 1, 1, 0));
  ASSERT_TRUE(c.ok());
  c->blockTable.as<int32_t>()[0] = static_cast<int32_t>(c->view().numPages);
  runtime::HostBackend host;
  StatusOr<IndexerOutput> out = host.run(c->view(), {});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("block_table[0][0]"), std::string::npos);
  EXPECT_TRUE(host.kernelRecords().empty());
}

} // namespace

// The score kernels write exactly the entries b < nblk of each (head, row) -- nothing past a row's
// blocks, nothing for prefill tiles' padding rows (which would land in the next request's rows) --
// with runs of blocks per program and decode CP's every-4th-block shares alike.
static void expectExactRowsWritten(const tuning::TargetTuning &tuning, ValueMode mode) {
  const uint32_t canary = 0x7FC0DEADu; // a NaN no kernel makes
  for (const Family &fam : families()) {
    if (fam.options.mode != mode)
      continue;
    StatusOr<Case> c = generateCase(fam.options);
    ASSERT_TRUE(c.ok()) << c.status().message();
    const BatchView v = c->view();
    const RowPlan plan = planRows(v);
    const int64_t H = v.params.numHeads, T = v.numRows, W = plan.scoreWidth;
    runtime::HostBackend host(tuning);
    for (int64_t step : {1, 4}) {
      std::vector<uint32_t> scores(H * T * W, canary);
      float *s = reinterpret_cast<float *>(scores.data());
      for (int64_t begin = 0; begin < step; ++begin)
        ASSERT_TRUE(host.execute(v, W, s, nullptr, kernels::kScoreDecode, {begin, step}).ok());
      ASSERT_TRUE(host.execute(v, W, s, nullptr, kernels::kScorePrefill).ok());
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t blk = 0; blk < W; ++blk) {
            const bool written = scores[(h * T + t) * W + blk] != canary;
            ASSERT_EQ(written, blk < plan.rows[t].nblk)
                << fam.name << ": head " << h << ", row " << t << ", block " << blk << " (nblk "
                << plan.rows[t].nblk << "), CP step " << step;
          }
    }
  }
}
TEST(HostBackend, ScoreKernelsWriteExactlyTheRowsBlocks) {
  for (ValueMode mode : {ValueMode::Exact, ValueMode::Realistic})
    expectExactRowsWritten(tuning::hostTuning(), mode);
}
// sm_90's table: these families' steps (at most 8 decode requests) in its small-step padded
// warpgroups, CP shares too.
TEST(HostBackend, ScoreKernelsWriteExactlyTheRowsBlocksInSm90SmallSteps) {
  expectExactRowsWritten(**tuning::tuningFor("sm_90"), ValueMode::Exact);
}

// Keys whose dot grows with the token's place in its block (token t: its first t % 128 + 1
// elements 6.0, the rest 0; q all 1.0), so a block's exact score is 6 x (1 + the place of the last
// token the row sees): a kernel that lets a row see one token too many, or too few, changes it.
// Context lengths at and around the 16-token tiles' edges, where a tile stops being seen whole.
TEST(HostBackend, MasksExactlyTheTokensEachRowDoesNotSee) {
  for (int ctx : {16, 17, 19, 32, 35, 128, 131, 144, 256, 260}) {
    GenOptions o = base(10 + ctx, 1, 3, 4);
    o.mode = ValueMode::Exact;
    o.localBlocks = 0; // every block scored, none a sentinel
    o.decodeContext = {ctx, ctx + 16};
    o.prefillQueryLen = {1, 64}; // tiles of 16 rows, whole and partial
    o.prefillContext = {ctx, ctx + 16};
    StatusOr<Case> c = generateCase(o);
    ASSERT_TRUE(c.ok()) << c.status().message();
    std::fill(c->q.bytes.begin(), c->q.bytes.end(), 0x38); // E4M3 1.0
    const int64_t pages = c->kv.shape[0];
    for (int64_t p = 0; p < pages; ++p) {
      uint8_t *page = c->kv.as<uint8_t>() + p * spec::kPageBytes;
      for (int64_t t = 0; t < spec::kSparseBlockSize; ++t) {
        for (int64_t i = 0; i < spec::kDataBytesPerToken; ++i) // elements 2i, 2i + 1
          page[t * spec::kDataBytesPerToken + i] =
              static_cast<uint8_t>((2 * i <= t ? 0x7 : 0) | (2 * i + 1 <= t ? 0x70 : 0)); // E2M1 6.0
        std::memset(page + spec::kPageDataBytes + t * spec::kScalesPerToken, 0x38, spec::kScalesPerToken);
      }
    }
    runtime::HostBackend host;
    StatusOr<IndexerOutput> got = host.run(c->view(), runtime::RunOptions{true});
    ASSERT_TRUE(got.ok()) << got.status().message();
    StatusOr<IndexerOutput> want = reference::runReference(c->view(), true);
    ASSERT_TRUE(want.ok());
    ASSERT_NO_FATAL_FAILURE(expectSameExactOutput(*got, *want, "context " + std::to_string(ctx)));
  }
}

// A device decode whose grid has many more programs than its step needs: with a small active
// target each request's blocks go in runs of up to 8 to its first programs (kernels::decodeRun),
// the rest leaving at once, and top-k finds the programs that had blocks by the same rule -- so a
// bad page anywhere in a request gives it no blocks, and the others keep theirs.
TEST(HostBackend, DeviceDecodeInRunsOfEightFindsEveryBadPage) {
  tuning::TargetTuning t = **tuning::tuningFor("sm_90");
  t.decodeActivePrograms = 8;
  GenOptions o = base(31, 1, 3, 0);
  o.mode = ValueMode::Exact;
  o.decodeContext = {40000, 40000}; // 313 blocks: runs of 8 (3 x 313 / 8 > 8), 40 of 512 programs a request
  StatusOr<Case> c = generateCase(o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const BatchView v = c->view();
  const int64_t maxSeqLen = 1 << 16, W = 512, T = v.numRows;
  const kernels::DecodeWorkspaceLayout layout = t.decodeWorkspace(1, T, W);
  std::vector<uint8_t> workspace(layout.bytes, 0);
  runtime::HostBackend host(t);
  StatusOr<IndexerOutput> want = reference::runReference(v, false);
  ASSERT_TRUE(want.ok());
  std::vector<int32_t> topk(T * spec::kTopkBlocks);
  ASSERT_TRUE(host.executeDeviceDecode(v, W, maxSeqLen, layout, workspace.data(), topk.data()).ok());
  EXPECT_EQ(topk, want->topk);
  int32_t *table = c->blockTable.as<int32_t>();
  const int64_t lastBlock = spec::blocksFor(v.seqLens[1]) - 1;
  for (int64_t block : {int64_t{0}, int64_t{7}, int64_t{8}, int64_t{200}, lastBlock}) {
    int32_t &entry = table[1 * v.maxBlocks + block];
    const int32_t page = entry;
    entry = static_cast<int32_t>(v.numPages);
    ASSERT_TRUE(host.executeDeviceDecode(v, W, maxSeqLen, layout, workspace.data(), topk.data()).ok());
    for (int64_t row = 0; row < T; ++row)
      for (int s = 0; s < spec::kTopkBlocks; ++s) {
        const int64_t i = row * spec::kTopkBlocks + s;
        EXPECT_EQ(topk[i], row / 4 == 1 ? -1 : want->topk[i]) << "bad block " << block << ", row " << row;
      }
    EXPECT_NE(host.status()[1], 0) << "bad block " << block;
    host.clearStatus();
    entry = page;
  }
  ASSERT_TRUE(host.executeDeviceDecode(v, W, maxSeqLen, layout, workspace.data(), topk.data()).ok());
  EXPECT_EQ(topk, want->topk);
}
