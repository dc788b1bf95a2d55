// `m3idx check`'s comparison must fail on real mismatches and pass near-tie swaps.
#include <gtest/gtest.h>

#include "casefile/CaseGenerator.h"
#include "core/Spec.h"
#include "reference/ReferenceIndexer.h"
#include "reference/TopkCheck.h"
#include "tests/TestCases.h"

using namespace m3idx;
using namespace m3idx::testing;

namespace {

Case realisticCase() {
  GenOptions o;
  o.seed = 3;
  o.numHeads = 2;
  o.numDecodes = 2;
  o.numPrefills = 1;
  return *generateCase(o);
}

} // namespace

TEST(TopkCheck, AcceptsTheReference) {
  Case c = realisticCase();
  IndexerOutput out = *reference::runReference(c.view(), true);
  reference::CheckReport r = reference::checkTopk(c.view(), out.topk);
  reference::checkScores(c.view(), out.scores, out.scoreWidth, r);
  EXPECT_TRUE(r.ok()) << r.problems.front();
  EXPECT_EQ(r.rowsChecked, 2 * c.view().numRows);
}

TEST(TopkCheck, RejectsASwapOfDistinctScores) {
  Case c = realisticCase();
  IndexerOutput out = *reference::runReference(c.view(), false);
  std::swap(out.topk[1], out.topk[5]); // head 0, row 0: scores differ by far more than rounding
  reference::CheckReport r = reference::checkTopk(c.view(), out.topk);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.mismatches, 1);
}

TEST(TopkCheck, RejectsDuplicatesOutOfRangeAndMissingMinusOne) {
  IndexerParams p;
  p.numDecodes = 0;
  Case c = buildCase(p, {1}, {3 * 128});
  std::vector<int32_t> topk(16, -1);
  topk[0] = 2, topk[1] = 1, topk[2] = 0;
  EXPECT_TRUE(reference::checkTopk(c.view(), topk).ok());
  topk[2] = 1;
  EXPECT_FALSE(reference::checkTopk(c.view(), topk).ok());
  topk[2] = 3;
  EXPECT_FALSE(reference::checkTopk(c.view(), topk).ok());
  topk[2] = 0, topk[3] = 0;
  EXPECT_FALSE(reference::checkTopk(c.view(), topk).ok());
}

TEST(TopkCheck, AcceptsSwapsAmongExactTies) {
  IndexerParams p;
  p.numDecodes = 0;
  p.localBlocks = 0;
  Case c = buildCase(p, {1}, {3 * 128}); // every block scores 0
  std::vector<int32_t> topk(16, -1);
  topk[0] = 0, topk[1] = 2, topk[2] = 1; // reference order is 2, 1, 0
  reference::CheckReport r = reference::checkTopk(c.view(), topk);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.nearTieSwaps, 3); // every slot differs from 2, 1, 0
}

TEST(TopkCheck, RejectsWrongScores) {
  Case c = realisticCase();
  IndexerOutput out = *reference::runReference(c.view(), true);
  out.scores[3] *= 1.01f;
  reference::CheckReport r;
  reference::checkScores(c.view(), out.scores, out.scoreWidth, r);
  EXPECT_FALSE(r.ok());
}
