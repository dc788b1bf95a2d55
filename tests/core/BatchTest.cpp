// One test per SPEC §7 value rule: each error names the argument, the expected and the actual.
#include <gtest/gtest.h>

#include "core/Batch.h"
#include "core/Spec.h"
#include "tests/TestCases.h"

using namespace m3idx;
using namespace m3idx::testing;

namespace {

IndexerParams decodeParams(int numDecodes = 1) {
  IndexerParams p;
  p.numHeads = 1;
  p.numDecodes = numDecodes;
  p.decodeQueryLen = 4;
  return p;
}

void expectError(const Case &c, const std::string &argument, const std::string &actual) {
  Status s = validateBatch(c.view());
  ASSERT_FALSE(s.ok()) << "accepted a batch that breaks " << argument;
  EXPECT_EQ(s.message().rfind(argument + ":", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("expected"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("got " + actual), std::string::npos) << s.message();
}

} // namespace

TEST(ValidateBatch, AcceptsAWellFormedMixedBatch) {
  Case c = buildCase(decodeParams(1), {4, 7}, {300, 900});
  EXPECT_TRUE(validateBatch(c.view()).ok()) << validateBatch(c.view()).message();
}

TEST(ValidateBatch, HeadsMustBe124) {
  IndexerParams p = decodeParams();
  p.numHeads = 3;
  Case c = buildCase(p, {4}, {300});
  expectError(c, "num_index_heads", "3");
}

TEST(ValidateBatch, InitBlocksNonNegative) {
  IndexerParams p = decodeParams();
  p.initBlocks = -1;
  expectError(buildCase(p, {4}, {300}), "init_blocks", "-1");
}

TEST(ValidateBatch, LocalBlocksNonNegative) {
  IndexerParams p = decodeParams();
  p.localBlocks = -2;
  expectError(buildCase(p, {4}, {300}), "local_blocks", "-2");
}

TEST(ValidateBatch, PrefillSeqLenAtLeastQLen) {
  Case c = buildCase(decodeParams(1), {4, 7}, {300, 900});
  c.seqLens.as<int32_t>()[1] = 6;
  expectError(c, "seq_lens[1]", "6");
}

TEST(ValidateBatch, DecodeSeqLenNonNegative) {
  Case c = buildCase(decodeParams(1), {4}, {300});
  c.seqLens.as<int32_t>()[0] = -1;
  expectError(c, "seq_lens[0]", "-1");
}

TEST(ValidateBatch, QueryStartLocMustIncrease) {
  Case c = buildCase(decodeParams(0), {3, 3}, {300, 300});
  c.queryStartLoc.as<int32_t>()[1] = 0; // request 0 would have no rows
  expectError(c, "query_start_loc[1]", "0");
}

TEST(ValidateBatch, QueryStartLocMustStartAtZero) {
  Case c = buildCase(decodeParams(0), {3}, {300});
  c.queryStartLoc.as<int32_t>()[0] = 1;
  expectError(c, "query_start_loc[0]", "1");
}

TEST(ValidateBatch, QueryStartLocMustMatchRowCount) {
  Case c = buildCase(decodeParams(0), {3, 5}, {300, 300});
  c.queryStartLoc.as<int32_t>()[2] = 7; // q has 8 rows
  expectError(c, "query_start_loc[2]", "7");
}

TEST(ValidateBatch, DecodeRequestsHaveDecodeQueryLenRows) {
  Case c = buildCase(decodeParams(2), {4, 4}, {300, 300});
  c.params.decodeQueryLen = 2;
  expectError(c, "query_start_loc[1]", "4");
}

TEST(ValidateBatch, NumDecodesAtMostRequests) {
  Case c = buildCase(decodeParams(1), {4}, {300});
  c.params.numDecodes = 2;
  expectError(c, "num_decodes", "2");
}

TEST(ValidateBatch, VisiblePageIdsInRange) {
  Case c = buildCase(decodeParams(1), {4}, {900}); // 8 pages
  c.blockTable.as<int32_t>()[3] = 8;
  expectError(c, "block_table[0][3]", "8");
  c.blockTable.as<int32_t>()[3] = -5;
  expectError(c, "block_table[0][3]", "-5");
}

TEST(ValidateBatch, InvisibleBlockTableEntriesAreIgnored) {
  Case c = buildCase(decodeParams(1), {4}, {300}, /*extraColumns=*/3);
  const int64_t M = c.blockTable.shape[1];
  c.blockTable.as<int32_t>()[M - 1] = 1 << 30;
  EXPECT_TRUE(validateBatch(c.view()).ok());
}

TEST(ValidateBatch, BlockTableWideEnough) {
  Case c = buildCase(decodeParams(1), {4}, {300}); // 3 blocks
  c.seqLens.as<int32_t>()[0] = 500;                // would need 4
  expectError(c, "block_table", "3 columns");
}

TEST(ValidateBatch, AtMost8192BlocksPerRow) {
  Case c = buildCase(decodeParams(1), {4}, {300});
  c.seqLens.as<int32_t>()[0] = spec::kMaxBlocksPerRow * spec::kSparseBlockSize + 1;
  expectError(c, "seq_lens[0]", "1048577");
}

TEST(ValidateBatch, AcceptsExactly8192Blocks) {
  Case c = buildCase(decodeParams(1), {4}, {spec::kMaxBlocksPerRow * spec::kSparseBlockSize});
  EXPECT_TRUE(validateBatch(c.view()).ok()) << validateBatch(c.view()).message();
}

TEST(PlanRows, CausalLengthsAndWidth) {
  Case c = buildCase(decodeParams(1), {4, 3}, {3, 200});
  RowPlan plan = planRows(c.view());
  ASSERT_EQ(plan.rows.size(), 7u);
  EXPECT_EQ(plan.rows[0].causalLen, 0); // 3 - 4 + 0 + 1
  EXPECT_EQ(plan.rows[0].nblk, 0);
  EXPECT_EQ(plan.rows[3].causalLen, 3);
  EXPECT_EQ(plan.rows[4].causalLen, 198);
  EXPECT_EQ(plan.rows[4].nblk, 2);
  EXPECT_EQ(plan.scoreWidth, 64);
  EXPECT_EQ(spec::scoreWidth(0), 64);
  EXPECT_EQ(spec::scoreWidth(64), 64);
  EXPECT_EQ(spec::scoreWidth(65), 128);
  EXPECT_EQ(spec::scoreWidth(129), 256);
  EXPECT_EQ(spec::scoreWidth(8192), 8192);
}
