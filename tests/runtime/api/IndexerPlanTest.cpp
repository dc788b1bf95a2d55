// Indexer::plan / Indexer::run on the host engine: every golden case and generated mixed steps
// through plan + run equal forward(); one plan run for several layers (other q), from several
// threads, by every indexer of the configuration, after the caller reused its arrays; bad input
// naming the argument.
#include <algorithm>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "casefile/CaseFile.h"
#include "casefile/CaseGenerator.h"
#include "m3idx/Indexer.h"
#include "runtime/api/BatchMetadata.h"
#include "tests/runtime/api/StepCase.h"
#include "tests/TestCases.h"

using namespace m3idx;

namespace {

using Step = m3idx::testing::StepCase;
using m3idx::testing::stepCaseOf;

std::unique_ptr<Step> generated(uint64_t seed, int heads, int decodes, int prefills, int decodeQueryLen = 4) {
  GenOptions o;
  o.seed = seed;
  o.numHeads = heads;
  o.numDecodes = decodes;
  o.numPrefills = prefills;
  o.decodeQueryLen = decodeQueryLen;
  o.initBlocks = 1;
  o.localBlocks = 2;
  o.decodeContext = {0, 5000};
  o.prefillQueryLen = {1, 300};
  o.prefillContext = {1, 3000};
  auto c = generateCase(o);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return stepCaseOf(std::move(c).value());
}

std::unique_ptr<Indexer> indexerFor(const Case &c) {
  auto indexer = Indexer::create(m3idx::testing::indexerConfigOf(c), Device{});
  EXPECT_TRUE(indexer.ok()) << indexer.status().message();
  return std::move(indexer).value();
}

std::vector<int32_t> topkOf(const StatusOr<ForwardResult> &r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok())
    return {};
  const int32_t *p = static_cast<const int32_t *>(r->topk.data);
  return std::vector<int32_t>(p, p + r->topk.numel());
}

// The plan's answer equals forward's, step by step.
void expectPlanEqualsForward(const Step &s, const std::string &what) {
  auto indexer = indexerFor(s.c);
  const std::vector<int32_t> want = topkOf(indexer->forward(s.q, s.kv, s.md()));
  auto plan = indexer->plan(s.md());
  ASSERT_TRUE(plan.ok()) << what << ": " << plan.status().message();
  EXPECT_EQ((*plan)->rows(), s.q.shape[0]) << what;
  EXPECT_EQ((*plan)->decodeRows(), int64_t{s.c.params.numDecodes} * s.c.params.decodeQueryLen) << what;
  auto r = indexer->run(**plan, s.q, s.kv);
  EXPECT_EQ(topkOf(r), want) << what;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->decodeTopk.shape[1], (*plan)->decodeRows()) << what;
  EXPECT_EQ(r->prefillTopk.shape[1], (*plan)->rows() - (*plan)->decodeRows()) << what;
}

} // namespace

TEST(IndexerPlan, EveryGoldenCaseEqualsForward) {
  for (const char *name : {"decode_exact", "prefill_exact", "decode_edge_nan_scales", "mixed_realistic"}) {
    StatusOr<Case> c = loadCase(m3idx::testing::goldenDir(name));
    ASSERT_TRUE(c.ok()) << c.status().message();
    expectPlanEqualsForward(*stepCaseOf(std::move(c).value()), name);
  }
}

TEST(IndexerPlan, GeneratedMixedStepsEqualForward) {
  int seed = 700;
  for (int heads : {1, 2, 4})
    for (auto [decodes, prefills, rows] : {std::tuple{7, 0, 1}, std::tuple{0, 4, 4}, std::tuple{5, 3, 2},
                                           std::tuple{3, 2, 8}, std::tuple{1, 1, 4}})
      expectPlanEqualsForward(*generated(++seed, heads, decodes, prefills, rows),
                              fmt::format("H={} decodes={} prefills={} rows={}", heads, decodes, prefills, rows));
}

TEST(IndexerPlan, OnePlanServesEveryLayerAfterTheArraysAreReused) {
  auto s = generated(31, 2, 4, 2);
  auto indexer = indexerFor(s->c);
  // Layers: the same metadata and kv_cache, each its own q.
  std::vector<std::vector<uint8_t>> qs;
  for (int layer = 0; layer < 3; ++layer) {
    qs.push_back(s->c.q.bytes);
    for (size_t i = 0; i < qs.back().size(); i += 7)
      qs.back()[i] ^= static_cast<uint8_t>(0x11 * (layer + 1));
  }
  std::vector<std::vector<int32_t>> want;
  for (auto &q : qs) {
    TensorView view = s->q;
    view.data = q.data();
    want.push_back(topkOf(indexer->forward(view, s->kv, s->md())));
  }
  ASSERT_NE(want[0], want[1]);
  auto plan = indexer->plan(s->md());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // The caller reuses its metadata arrays for the next step at once: the plan holds copies.
  runtime::BatchMetadata &m = s->split;
  for (TensorView t : {m.decode.blockTable, m.decode.seqLens, m.prefill.blockTable, m.prefill.seqLens})
    std::memset(t.data, 0x7f, t.numel() * 4);
  std::fill(m.prefillQueryStartLoc.begin(), m.prefillQueryStartLoc.end(), -3);
  for (int round = 0; round < 2; ++round)
    for (size_t layer = 0; layer < qs.size(); ++layer) {
      TensorView view = s->q;
      view.data = qs[layer].data();
      EXPECT_EQ(topkOf(indexer->run(**plan, view, s->kv)), want[layer]) << "layer " << layer;
    }
}

TEST(IndexerPlan, SteadyStateRunsNeitherCompileNorAllocate) {
  auto s = generated(32, 1, 3, 2);
  auto indexer = indexerFor(s->c);
  ASSERT_TRUE(indexer->warmup().ok());
  auto plan = indexer->plan(s->md());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_TRUE(indexer->run(**plan, s->q, s->kv).ok());
  const int64_t compiles = indexer->compilesAfterWarmup(), allocations = indexer->scratchAllocations();
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(indexer->run(**plan, s->q, s->kv).ok());
  EXPECT_EQ(indexer->compilesAfterWarmup(), compiles);
  EXPECT_EQ(indexer->scratchAllocations(), allocations);
}

TEST(IndexerPlan, ThreadsShareOnePlan) {
  auto a = generated(33, 2, 3, 2), b = generated(34, 2, 2, 1);
  auto indexer = indexerFor(a->c);
  auto planA = indexer->plan(a->md()), planB = indexer->plan(b->md());
  ASSERT_TRUE(planA.ok() && planB.ok());
  const std::vector<int32_t> wantA = topkOf(indexer->forward(a->q, a->kv, a->md()));
  const std::vector<int32_t> wantB = topkOf(indexer->forward(b->q, b->kv, b->md()));
  ASSERT_NE(wantA, wantB);
  auto run = [&](const IndexerPlan &plan, const Step &s, const std::vector<int32_t> &want, int *wrong) {
    std::vector<int32_t> out(want.size());
    const TensorView view = TensorView::contiguous(out.data(), DType::I32, {2, s.q.shape[0], 16});
    for (int i = 0; i < 15; ++i) {
      std::fill(out.begin(), out.end(), 12345);
      auto r = indexer->run(plan, s.q, s.kv, nullptr, &view);
      *wrong += !r.ok() || out != want;
    }
  };
  int wrong[3] = {};
  std::thread t0(run, std::cref(**planA), std::cref(*a), std::cref(wantA), &wrong[0]);
  std::thread t1(run, std::cref(**planA), std::cref(*a), std::cref(wantA), &wrong[1]);
  std::thread t2(run, std::cref(**planB), std::cref(*b), std::cref(wantB), &wrong[2]);
  t0.join();
  t1.join();
  t2.join();
  EXPECT_EQ(wrong[0] + wrong[1] + wrong[2], 0);
}

TEST(IndexerPlan, BadInputNamesTheArgument) {
  auto s = generated(35, 1, 3, 2);
  auto indexer = indexerFor(s->c);
  auto expectError = [](const Status &status, const std::string &want) {
    ASSERT_FALSE(status.ok()) << "expected: " << want;
    EXPECT_NE(status.message().find(want), std::string::npos) << status.message();
  };
  // plan(): what forward() checks of the metadata.
  {
    runtime::BatchMetadata m = s->split;
    m.decode.decodeQueryLen = 0;
    expectError(indexer->plan(m.metadata()).status(), "decode.decode_query_len");
  }
  {
    runtime::BatchMetadata m = s->split;
    std::vector<int32_t> lens(m.prefill.seqLens.numel());
    std::memcpy(lens.data(), m.prefill.seqLens.data, lens.size() * 4);
    lens[0] = -1;
    m.prefill.seqLens.data = lens.data();
    expectError(indexer->plan(m.metadata()).status(), "prefill.seq_lens[0]");
  }
  {
    runtime::BatchMetadata m = s->split;
    std::vector<int32_t> table(m.decode.blockTable.numel());
    std::memcpy(table.data(), m.decode.blockTable.data, table.size() * 4);
    table[0] = -5;
    m.decode.blockTable.data = table.data();
    expectError(indexer->plan(m.metadata()).status(), "decode.block_table[0][0]");
  }
  auto plan = indexer->plan(s->md());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // run(): index_query's rows, kv_cache's pages, topk_out's shape, a plan of another configuration.
  TensorView q = s->q;
  q.shape[0] -= 1;
  expectError(indexer->run(**plan, q, s->kv).status(), "index_query: expected " + std::to_string(s->q.shape[0]) + " rows");
  TensorView kv = s->kv;
  kv.shape[0] = 1; // every page id but 0 is missing
  expectError(indexer->run(**plan, s->q, kv).status(), "block_table[");
  std::vector<int32_t> out(16);
  const TensorView small = TensorView::contiguous(out.data(), DType::I32, {1, 1, 16});
  expectError(indexer->run(**plan, s->q, s->kv, nullptr, &small).status(), "topk_out");
  Case otherHeads = s->c;
  otherHeads.params.numHeads = 2;
  expectError(indexerFor(otherHeads)->run(**plan, s->q, s->kv).status(),
              "plan: expected a plan of an indexer of this configuration");
}

// An engine holds an Indexer a layer: each runs the step's one plan, also after its maker is gone.
TEST(IndexerPlan, EveryIndexerOfTheConfigurationRunsAPlan) {
  auto s = generated(36, 2, 3, 2);
  std::vector<std::unique_ptr<Indexer>> layers;
  for (int i = 0; i < 3; ++i)
    layers.push_back(indexerFor(s->c));
  const std::vector<int32_t> want = topkOf(layers[0]->forward(s->q, s->kv, s->md()));
  auto plan = layers[0]->plan(s->md());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (auto &layer : layers)
    EXPECT_EQ(topkOf(layer->run(**plan, s->q, s->kv)), want);
  layers[0].reset();
  EXPECT_EQ(topkOf(layers[1]->run(**plan, s->q, s->kv)), want);
}
