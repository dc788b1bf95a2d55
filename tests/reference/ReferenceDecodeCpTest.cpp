// SPEC §6: the 4-rank decode CP simulation equals the local reference bit for bit, and every gating
// rule falls back to local scoring with a reason.
#include <cstring>

#include <gtest/gtest.h>

#include "casefile/CaseGenerator.h"
#include "core/Spec.h"
#include "reference/ReferenceIndexer.h"

using namespace m3idx;

namespace {

GenOptions cpOptions(uint64_t seed, int decodes, int prefills) {
  GenOptions o;
  o.seed = seed;
  o.numHeads = 4;
  o.numDecodes = decodes;
  o.decodeQueryLen = 4;
  o.numPrefills = prefills;
  o.decodeContext = {1, 3000};
  o.prefillContext = {1, 1500};
  o.prefillQueryLen = {1, 40};
  o.initBlocks = static_cast<int>(seed % 3);
  o.localBlocks = static_cast<int>(seed % 2);
  o.nanScaleFraction = seed % 4 == 0 ? 0.01 : 0.0;
  o.extraPages = 1;
  return o;
}

void expectBitIdentical(const IndexerOutput &a, const IndexerOutput &b) {
  ASSERT_EQ(a.topk, b.topk);
  ASSERT_EQ(a.scores.size(), b.scores.size());
  EXPECT_EQ(std::memcmp(a.scores.data(), b.scores.data(), a.scores.size() * sizeof(float)), 0);
}

} // namespace

TEST(ReferenceDecodeCp, EqualsLocalBitForBitOnRandomBatches) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    GenOptions o = cpOptions(seed, 1 + static_cast<int>(seed * 7 % 20), static_cast<int>(seed % 3));
    if (seed % 2)
      o.mode = ValueMode::Exact;
    StatusOr<Case> c = generateCase(o);
    ASSERT_TRUE(c.ok()) << c.status().message();
    StatusOr<IndexerOutput> local = reference::runReference(c->view(), true);
    std::string fallback;
    StatusOr<IndexerOutput> cp = reference::runReferenceDecodeCp(c->view(), 4, &fallback);
    ASSERT_TRUE(local.ok() && cp.ok());
    EXPECT_TRUE(fallback.empty()) << fallback;
    expectBitIdentical(*local, *cp);
  }
}

TEST(ReferenceDecodeCp, Serves256Requests) {
  GenOptions o = cpOptions(99, 256, 1);
  o.decodeContext = {4, 700};
  StatusOr<Case> c = generateCase(o);
  ASSERT_TRUE(c.ok());
  std::string fallback;
  StatusOr<IndexerOutput> cp = reference::runReferenceDecodeCp(c->view(), 4, &fallback);
  ASSERT_TRUE(cp.ok());
  EXPECT_TRUE(fallback.empty()) << fallback;
  expectBitIdentical(*reference::runReference(c->view(), true), *cp);
}

TEST(ReferenceDecodeCp, GatingFallsBackWithAReason) {
  IndexerParams p;
  p.numHeads = 4;
  p.numDecodes = 3;
  p.decodeQueryLen = 4;
  EXPECT_TRUE(decideDecodeCp(p, 4, false).useCp);

  auto reason = [](IndexerParams q, int world, bool dbo) {
    CpDecision d = decideDecodeCp(q, world, dbo);
    EXPECT_FALSE(d.useCp);
    return d.fallbackReason;
  };
  EXPECT_NE(reason(p, 2, false).find("WORLD"), std::string::npos);
  IndexerParams twoHeads = p;
  twoHeads.numHeads = 8;
  EXPECT_NE(reason(twoHeads, 4, false).find("num_index_heads"), std::string::npos);
  IndexerParams qlen = p;
  qlen.decodeQueryLen = 2;
  EXPECT_NE(reason(qlen, 4, false).find("decode_query_len"), std::string::npos);
  IndexerParams many = p;
  many.numDecodes = 257;
  EXPECT_NE(reason(many, 4, false).find("256"), std::string::npos);
  EXPECT_NE(reason(p, 4, true).find("dual-batch"), std::string::npos);
}

TEST(ReferenceDecodeCp, UnservedStepStillEqualsLocal) {
  GenOptions o = cpOptions(5, 3, 1);
  o.decodeQueryLen = 2;
  o.decodeContext = {2, 900};
  StatusOr<Case> c = generateCase(o);
  ASSERT_TRUE(c.ok());
  std::string fallback;
  StatusOr<IndexerOutput> cp = reference::runReferenceDecodeCp(c->view(), 4, &fallback);
  ASSERT_TRUE(cp.ok());
  EXPECT_NE(fallback.find("decode_query_len"), std::string::npos);
  expectBitIdentical(*reference::runReference(c->view(), true), *cp);
}
