// Hand-worked cases for SPEC §4-5, run on every backend (the scalar reference and the host JIT):
// each expected top-k is written here, reasoned from the few key/query values the test sets
// (everything else is zero).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "core/Spec.h"
#include "reference/ReferenceIndexer.h"
#include "reference/ReferenceScore.h"
#include "runtime/Backend.h"
#include "tests/TestCases.h"

using namespace m3idx;
using namespace m3idx::testing;

namespace {

using Ids = std::vector<int32_t>;

Ids ids(std::initializer_list<int32_t> head) {
  Ids v(head);
  v.resize(spec::kTopkBlocks, -1);
  return v;
}

IndexerParams params(int heads, int init, int local, int numDecodes) {
  IndexerParams p;
  p.numHeads = heads;
  p.initBlocks = init;
  p.localBlocks = local;
  p.numDecodes = numDecodes;
  p.decodeQueryLen = 4;
  return p;
}

class BackendCases : public ::testing::TestWithParam<std::string> {
protected:
  IndexerOutput run(const Case &c) {
    StatusOr<std::unique_ptr<runtime::Backend>> backend = runtime::makeBackend(GetParam());
    EXPECT_TRUE(backend.ok());
    StatusOr<IndexerOutput> out = (*backend)->run(c.view(), runtime::RunOptions{true});
    EXPECT_TRUE(out.ok()) << out.status().message();
    return out.ok() ? *out : IndexerOutput{};
  }
};

float score(const IndexerOutput &o, int head, int64_t row, int block) {
  return o.scores[(head * o.numRows + row) * o.scoreWidth + block];
}

constexpr uint8_t kNib1 = 2, kNib0_5 = 1, kNib1_5 = 3, kNib6 = 7, kNibMinus1 = 10,
                  kNibMinus3 = 13;

} // namespace

TEST_P(BackendCases, EqualScoresPutHigherBlockFirst) {
  Case c = buildCase(params(1, 0, 1, 1), {4}, {640}); // 5 blocks for every row
  for (int row = 0; row < 4; ++row)
    setQuery(c, row, 0, 0, kOne);
  for (int b = 0; b < 4; ++b)
    setKey(c, 0, 128 * b, 0, kNib1, kOne);
  IndexerOutput o = run(c);
  for (int row = 0; row < 4; ++row) {
    EXPECT_EQ(topkRow(o.topk, 4, 0, row), ids({4, 3, 2, 1, 0})) << row;
    EXPECT_EQ(score(o, 0, row, 0), 1.0f);
    EXPECT_EQ(score(o, 0, row, 4), 1e29f);
  }
}

TEST_P(BackendCases, DistinctScoresDescend) {
  Case c = buildCase(params(1, 0, 1, 1), {4}, {640});
  for (int row = 0; row < 4; ++row)
    setQuery(c, row, 0, 0, kOne);
  setKey(c, 0, 5, 0, kNib0_5, kOne);           // block 0: 0.5
  setKey(c, 0, 128 + 70, 0, kNib6, 0x40);       // block 1: 6 * 2 = 12
  setKey(c, 0, 256 + 1, 0, kNibMinus3, kOne);   // block 2: max(-3, zeros) = 0
  setKey(c, 0, 384 + 127, 0, kNib1_5, kOne);    // block 3: 1.5
  IndexerOutput o = run(c);
  EXPECT_EQ(topkRow(o.topk, 4, 0, 3), ids({4, 1, 3, 0, 2}));
  EXPECT_EQ(score(o, 0, 3, 1), 12.0f);
  EXPECT_EQ(score(o, 0, 3, 2), 0.0f);
}

TEST_P(BackendCases, InitAndLocalSentinelsOverlap) {
  // nblk 3, init 2, local 2: block 0 is a sink (1e30); block 1 is both, and local wins (1e29).
  Case c = buildCase(params(1, 2, 2, 1), {4}, {300});
  IndexerOutput o = run(c);
  EXPECT_EQ(topkRow(o.topk, 4, 0, 0), ids({0, 2, 1}));
  EXPECT_EQ(score(o, 0, 0, 0), 1e30f);
  EXPECT_EQ(score(o, 0, 0, 1), 1e29f);
  EXPECT_EQ(score(o, 0, 0, 2), 1e29f);
}

TEST_P(BackendCases, InitLargerThanRowAndLocalZero) {
  Case c = buildCase(params(1, 5, 0, 1), {4}, {300});
  IndexerOutput o = run(c);
  EXPECT_EQ(topkRow(o.topk, 4, 0, 2), ids({2, 1, 0}));
  EXPECT_EQ(score(o, 0, 2, 1), 1e30f);
}

TEST_P(BackendCases, RowsThatSeeNothing) {
  // L = 3 with 4 decode rows: causal lengths 0, 1, 2, 3.
  Case c = buildCase(params(1, 0, 0, 1), {4}, {3});
  for (int row = 0; row < 4; ++row)
    setQuery(c, row, 0, 0, kOne);
  setKey(c, 0, 2, 0, kNib6, kOne); // only row 3 sees token 2
  IndexerOutput o = run(c);
  EXPECT_EQ(topkRow(o.topk, 4, 0, 0), ids({}));
  EXPECT_EQ(topkRow(o.topk, 4, 0, 1), ids({0}));
  EXPECT_EQ(score(o, 0, 1, 0), 0.0f);
  EXPECT_EQ(score(o, 0, 3, 0), 6.0f);
  EXPECT_TRUE(std::isnan(score(o, 0, 0, 0))); // never written: b >= nblk
}

TEST_P(BackendCases, CausalMaskInsideAPartialBlock) {
  // Prefill q_len 3, L = 130: rows see 128, 129, 130 tokens.
  Case c = buildCase(params(1, 0, 0, 0), {3}, {130});
  for (int row = 0; row < 3; ++row)
    setQuery(c, row, 0, 0, kOne);
  setKey(c, 0, 128, 0, kNibMinus1, kOne); // visible to rows 1, 2
  setKey(c, 0, 129, 0, kNib6, kOne);      // visible to row 2
  setKey(c, 0, 135, 0, kNib6, 0x7E);      // past seq_len: never read
  IndexerOutput o = run(c);
  EXPECT_EQ(topkRow(o.topk, 3, 0, 0), ids({0}));
  EXPECT_EQ(topkRow(o.topk, 3, 0, 1), ids({0, 1}));
  EXPECT_EQ(score(o, 0, 1, 1), -1.0f);
  EXPECT_EQ(topkRow(o.topk, 3, 0, 2), ids({1, 0}));
  EXPECT_EQ(score(o, 0, 2, 1), 6.0f);
}

TEST_P(BackendCases, MoreThanSixteenBlocksKeepsTheTop16) {
  Case c = buildCase(params(1, 0, 1, 0), {1}, {20 * 128});
  setQuery(c, 0, 0, 0, kOne);
  for (int b = 0; b < 20; ++b)
    setKey(c, 0, 128 * b, 0, kNib1, kOne);
  setKey(c, 0, 128 * 2, 0, kNib6, kOne); // block 2 is the best non-local
  IndexerOutput o = run(c);
  EXPECT_EQ(topkRow(o.topk, 1, 0, 0),
            (Ids{19, 2, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5}));
}

TEST_P(BackendCases, SixteenOrFewerBlocksAllListed) {
  Case c = buildCase(params(1, 0, 1, 0), {1}, {16 * 128});
  IndexerOutput o = run(c);
  EXPECT_EQ(topkRow(o.topk, 1, 0, 0),
            (Ids{15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
}

TEST_P(BackendCases, NaNKeysAreIgnoredAndAllNaNBlocksScoreMinusInf) {
  Case c = buildCase(params(1, 0, 0, 0), {1}, {3 * 128});
  setQuery(c, 0, 0, 0, kOne);
  for (int t = 0; t < 128; ++t)
    setKey(c, 0, t, 0, 0, 0x7F);          // block 0: every dot NaN
  setKey(c, 0, 128, 0, 0, 0xFF);          // block 1: one NaN dot, others 0
  for (int t = 256; t < 384; ++t)
    setKey(c, 0, t, 0, kNibMinus1, kOne); // block 2: every dot -1
  IndexerOutput o = run(c);
  EXPECT_EQ(topkRow(o.topk, 1, 0, 0), ids({1, 2, 0}));
  EXPECT_EQ(score(o, 0, 0, 0), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(score(o, 0, 0, 1), 0.0f);
  EXPECT_EQ(score(o, 0, 0, 2), -1.0f);
}

TEST_P(BackendCases, AllZeroQueriesTieEverywhere) {
  Case c = buildCase(params(1, 0, 0, 0), {1}, {4 * 128});
  for (int t = 0; t < 4 * 128; t += 3)
    setKeyAll(c, 0, t, kNibMinus3, 0x40);
  IndexerOutput o = run(c);
  EXPECT_EQ(topkRow(o.topk, 1, 0, 0), ids({3, 2, 1, 0}));
}

TEST_P(BackendCases, HeadsScoreIndependently) {
  Case c = buildCase(params(2, 0, 0, 0), {1}, {3 * 128});
  setQuery(c, 0, 0, 0, kOne);
  setQuery(c, 0, 1, 0, 0xB8); // -1.0
  setKey(c, 0, 0, 0, kNib6, kOne);
  setKey(c, 0, 128, 0, kNib1, kOne);
  setKey(c, 0, 256, 0, kNibMinus1, kOne);
  IndexerOutput o = run(c);
  EXPECT_EQ(topkRow(o.topk, 1, 0, 0), ids({0, 1, 2}));
  EXPECT_EQ(topkRow(o.topk, 1, 1, 0), ids({2, 1, 0})); // scores 0, 0, 1: the tie puts 1 first
  EXPECT_EQ(score(o, 1, 0, 2), 1.0f);
  EXPECT_EQ(score(o, 1, 0, 0), 0.0f); // max(-6, zeros)
}

TEST(ReferenceTopk, NegativeZeroTiesPositiveZeroAndNaNIsMinusInf) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  std::vector<float> s = {-0.0f, 0.0f, -0.0f, nan, -inf, -1.0f};
  std::vector<int32_t> out(16);
  reference::topkRow(s, 6, out);
  // zeros tie (2, 1, 0), then -1, then NaN and -inf tie as -inf (higher id first: 4, 3).
  EXPECT_EQ(out, ids({2, 1, 0, 5, 4, 3}));
}

TEST_P(BackendCases, MixedBatchRowsKeepDecodeThenPrefillOrder) {
  Case c = buildCase(params(1, 0, 1, 1), {4, 2}, {256, 384});
  setQuery(c, 4, 0, 0, kOne);
  setQuery(c, 5, 0, 0, kOne);
  setKey(c, 1, 0, 0, kNib6, kOne);
  IndexerOutput o = run(c);
  EXPECT_EQ(o.numRows, 6);
  EXPECT_EQ(topkRow(o.topk, 6, 0, 0), ids({1, 0}));
  EXPECT_EQ(topkRow(o.topk, 6, 0, 5), ids({2, 0, 1}));
}

TEST_P(BackendCases, InvalidBatchIsAnError) {
  Case c = buildCase(params(1, 0, 1, 1), {4}, {300});
  c.blockTable.as<int32_t>()[0] = 1000;
  StatusOr<IndexerOutput> out = (*runtime::makeBackend(GetParam()))->run(c.view(), {});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("block_table[0][0]"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendCases, ::testing::Values("ref", "host"),
                         [](const auto &info) { return info.param; });
