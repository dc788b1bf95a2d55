// Decode CP's gate (SPEC §6): served exactly when every condition holds; otherwise the first
// failing condition is named.
#include <gtest/gtest.h>

#include "core/DecodeCpPolicy.h"

using namespace m3idx;

namespace {

IndexerParams servable() {
  IndexerParams p;
  p.numHeads = 4;
  p.numDecodes = 256;
  p.decodeQueryLen = 4;
  return p;
}

void expectRefused(const IndexerParams &p, int world, bool dbo, const std::string &why) {
  CpDecision d = decideDecodeCp(p, world, dbo);
  EXPECT_FALSE(d.useCp);
  EXPECT_NE(d.fallbackReason.find(why), std::string::npos) << d.fallbackReason;
}

} // namespace

TEST(DecodeCpPolicy, ServesExactlyWhenEveryConditionHolds) {
  CpDecision d = decideDecodeCp(servable(), 4, false);
  EXPECT_TRUE(d.useCp);
  EXPECT_TRUE(d.fallbackReason.empty());
  IndexerParams prefillOnly = servable();
  prefillOnly.numDecodes = 0;
  prefillOnly.decodeQueryLen = 1; // no decode rows: their query length does not matter
  EXPECT_TRUE(decideDecodeCp(prefillOnly, 4, false).useCp);
}

TEST(DecodeCpPolicy, EachFailingConditionIsNamed) {
  expectRefused(servable(), 2, false, "needs TP == WORLD == 4, got 2");
  IndexerParams p = servable();
  p.numHeads = 8;
  expectRefused(p, 4, false, "num_index_heads == 1 per rank, got 8 heads over 4 ranks");
  p = servable();
  p.decodeQueryLen = 2;
  expectRefused(p, 4, false, "decode_query_len == 4, got 2");
  p = servable();
  p.numDecodes = 257;
  expectRefused(p, 4, false, "at most 256 decode requests, got 257");
  expectRefused(servable(), 4, true, "dual-batch overlap");
}
