// The host-app API: config rejection per field, forward on decode-only / prefill-only / mixed
// batches equal to the reference, no JIT or scratch growth after warm-up, boundary validation.
#include <cstdlib>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "casefile/CaseGenerator.h"
#include "core/Spec.h"
#include "m3idx/Indexer.h"
#include "reference/ReferenceIndexer.h"
#include "runtime/api/BatchMetadata.h"
#include "tests/runtime/api/StepCase.h"

using namespace m3idx;

namespace {

using Step = m3idx::testing::StepCase;

std::unique_ptr<Step> makeStep(uint64_t seed, int heads, int decodes, int prefills,
                               ValueMode mode = ValueMode::Exact) {
  GenOptions o;
  o.seed = seed;
  o.mode = mode;
  o.numHeads = heads;
  o.numDecodes = decodes;
  o.numPrefills = prefills;
  o.initBlocks = 1;
  o.localBlocks = 1;
  o.decodeContext = {0, 3000};
  o.prefillQueryLen = {1, 40};
  return m3idx::testing::stepCaseOf(*generateCase(o));
}

IndexerConfig configFor(const Step &s) { return m3idx::testing::indexerConfigOf(s.c); }

std::unique_ptr<Indexer> warmIndexer(const IndexerConfig &config) {
  auto indexer = Indexer::create(config, Device{});
  EXPECT_TRUE(indexer.ok()) << indexer.status().message();
  EXPECT_TRUE((*indexer)->warmup().ok());
  return std::move(indexer).value();
}

std::vector<int32_t> copyTopk(const ForwardResult &r) {
  const int32_t *p = static_cast<const int32_t *>(r.topk.data);
  return std::vector<int32_t>(p, p + r.topk.numel());
}

} // namespace

TEST(UnsupportedReason, EachFieldNamed) {
  IndexerConfig ok;
  EXPECT_EQ(unsupportedReason(ok, DeviceKind::Host), "");
  struct Case {
    std::function<void(IndexerConfig &)> mutate;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](IndexerConfig &c) { c.numIndexHeads = 3; }, "num_index_heads must be 1, 2 or 4"},
      {[](IndexerConfig &c) { c.indexHeadDim = 64; }, "index_head_dim must be 128, got 64"},
      {[](IndexerConfig &c) { c.sparseBlockSize = 64; }, "sparse_block_size must be 128, got 64"},
      {[](IndexerConfig &c) { c.topkBlocks = 32; }, "topk_blocks must be 16, got 32"},
      {[](IndexerConfig &c) { c.scoreType = "sum"; }, "score_type must be \"max\", got \"sum\""},
      {[](IndexerConfig &c) { c.kvDtype = "fp8"; }, "kv_dtype must be \"nvfp4\", got \"fp8\""},
      {[](IndexerConfig &c) { c.initBlocks = -1; }, "init_blocks must be >= 0, got -1"},
      {[](IndexerConfig &c) { c.localBlocks = -1; }, "local_blocks must be >= 0, got -1"},
      {[](IndexerConfig &c) { c.maxModelLen = (1 << 20) + 1; }, "max_model_len must be in [1, 1048576]"},
      {[](IndexerConfig &c) { c.decodeQueryLens = {0}; }, "decode_query_len must be in [1, 64], got 0"},
  };
  for (const Case &c : cases) {
    IndexerConfig config;
    c.mutate(config);
    std::string reason = unsupportedReason(config, DeviceKind::Host);
    EXPECT_NE(reason.find(c.field), std::string::npos) << reason;
    auto indexer = Indexer::create(config, Device{});
    ASSERT_FALSE(indexer.ok());
    EXPECT_NE(indexer.status().message().find(c.field), std::string::npos);
  }
  EXPECT_EQ(unsupportedReason(ok, DeviceKind::Cuda), "");
  std::string hip = unsupportedReason(ok, DeviceKind::Hip);
  EXPECT_NE(hip.find("device hip is not served by the Indexer API"), std::string::npos) << hip;
  // Config errors come before any driver is looked for.
  IndexerConfig bad;
  bad.numIndexHeads = 3;
  auto indexer = Indexer::create(bad, Device{DeviceKind::Cuda, 0});
  ASSERT_FALSE(indexer.ok());
  EXPECT_NE(indexer.status().message().find("num_index_heads"), std::string::npos);
}

TEST(Indexer, CudaWithoutADriverIsAClearError) {
  ::setenv("M3IDX_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  auto indexer = Indexer::create(IndexerConfig{}, Device{DeviceKind::Cuda, 0});
  ::unsetenv("M3IDX_CUDA_LIBRARY");
  ASSERT_FALSE(indexer.ok());
  EXPECT_NE(indexer.status().message().find("cannot load the driver library /nonexistent/libcuda.so.1"),
            std::string::npos)
      << indexer.status().message();
}

TEST(Indexer, ForwardEqualsReferenceOnDecodePrefillAndMixed) {
  for (auto [decodes, prefills] : {std::pair{6, 0}, std::pair{0, 3}, std::pair{5, 2}}) {
    for (int heads : {1, 4}) {
      auto s = makeStep(decodes * 10 + prefills + heads, heads, decodes, prefills);
      auto indexer = warmIndexer(configFor(*s));
      auto r = indexer->forward(s->q, s->kv, s->md());
      ASSERT_TRUE(r.ok()) << r.status().message();
      auto want = reference::runReference(s->c.view(), false);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(copyTopk(*r), want->topk) << decodes << " decodes, " << prefills << " prefills";
      const int64_t decodeRows = int64_t{decodes} * 4;
      EXPECT_EQ(r->decodeTopk.shape[1], decodeRows);
      EXPECT_EQ(r->prefillTopk.shape[1], s->c.view().numRows - decodeRows);
      EXPECT_EQ(r->prefillTopk.strides[0], s->c.view().numRows * 16);
      EXPECT_EQ(indexer->compilesAfterWarmup(), 0);
    }
  }
}

TEST(Indexer, SteadyStateNeitherCompilesNorAllocates) {
  auto first = makeStep(1, 2, 4, 2);
  auto second = makeStep(2, 2, 4, 2); // same shapes class, other values and lengths
  auto indexer = warmIndexer(configFor(*first));
  ASSERT_TRUE(indexer->forward(first->q, first->kv, first->md()).ok());
  ASSERT_TRUE(indexer->forward(second->q, second->kv, second->md()).ok());
  const int64_t allocations = indexer->scratchAllocations();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(indexer->forward(first->q, first->kv, first->md()).ok());
    ASSERT_TRUE(indexer->forward(second->q, second->kv, second->md()).ok());
  }
  EXPECT_EQ(indexer->compilesAfterWarmup(), 0);
  EXPECT_EQ(indexer->scratchAllocations(), allocations);
}

TEST(Indexer, LateCompileIsCountedAndLogged) {
  auto s = makeStep(3, 1, 2, 0);
  IndexerConfig config = configFor(*s);
  config.decodeQueryLens = {2}; // the step uses 4: not warmed up
  auto indexer = warmIndexer(config);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(indexer->forward(s->q, s->kv, s->md()).ok());
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(indexer->compilesAfterWarmup(), 2); // score_decode and topk_decode for 4 rows
  EXPECT_NE(log.find("JIT compile after warm-up: score_decode"), std::string::npos) << log;
}

TEST(Indexer, CallerProvidedTopkBuffer) {
  auto s = makeStep(4, 2, 3, 1);
  auto indexer = warmIndexer(configFor(*s));
  const int64_t T = s->c.view().numRows;
  std::vector<int32_t> buffer(2 * T * 16, 12345);
  TensorView out = TensorView::contiguous(buffer.data(), DType::I32, {2, T, 16});
  auto r = indexer->forward(s->q, s->kv, s->md(), nullptr, &out);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->topk.data, buffer.data());
  EXPECT_EQ(buffer, reference::runReference(s->c.view(), false)->topk);
}

TEST(Indexer, BoundaryValidationNamesTheArgument) {
  auto s = makeStep(5, 2, 2, 1);
  auto indexer = warmIndexer(configFor(*s));
  auto expectError = [&](const TensorView &q, const TensorView &kv, const IndexerMetadata &md,
                         const std::string &needle, const TensorView *out = nullptr) {
    auto r = indexer->forward(q, kv, md, nullptr, out);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  TensorView q = s->q;
  q.dtype = DType::I32;
  expectError(q, s->kv, s->md(), "index_query: expected dtype uint8, got int32");
  const int64_t T = s->q.shape[0];
  q = TensorView::contiguous(s->q.data, DType::U8, {T, 1, 128});
  expectError(q, s->kv, s->md(), "index_query: expected shape[1] == 2");
  q = s->q;
  q.strides[0] = 512;
  expectError(q, s->kv, s->md(), "index_query: expected contiguous strides");
  q = s->q;
  q.device = Device{DeviceKind::Cuda, 0};
  expectError(q, s->kv, s->md(), "index_query: expected device host:0, got cuda:0");
  DecodeMetadata onDevice = s->split.decode; // metadata is read on the host on every device
  onDevice.seqLens.device = Device{DeviceKind::Cuda, 0};
  expectError(s->q, s->kv, IndexerMetadata{&onDevice, &s->split.prefill},
              "decode.seq_lens: expected device host:0, got cuda:0");
  PrefillMetadata withCopy = s->split.prefill; // a device copy of the table is for GPU indexers
  withCopy.deviceBlockTable = withCopy.blockTable;
  expectError(s->q, s->kv, IndexerMetadata{&s->split.decode, &withCopy},
              "prefill.device_block_table: expected no table (a device copy is for GPU indexers)");
  TensorView kv = TensorView::contiguous(s->kv.data, DType::U8, {s->kv.shape[0], 8192});
  expectError(s->q, kv, s->md(), "kv_cache: expected shape[1] == 9216");
  q = TensorView::contiguous(s->q.data, DType::U8, {T - 1, 2, 128});
  expectError(q, s->kv, s->md(), "prefill.query_start_loc");
  DecodeMetadata d = s->split.decode;
  d.maxSeqLen = 1;
  expectError(s->q, s->kv, IndexerMetadata{&d, &s->split.prefill}, "decode.max_seq_len");
  d = s->split.decode;
  std::vector<int32_t> table(static_cast<int32_t *>(d.blockTable.data),
                             static_cast<int32_t *>(d.blockTable.data) + d.blockTable.numel());
  table[0] = 1 << 30;
  d.blockTable.data = table.data();
  expectError(s->q, s->kv, IndexerMetadata{&d, &s->split.prefill}, "decode.block_table[0][0]");
  PrefillMetadata p = s->split.prefill;
  p.maxQueryLen = 0;
  expectError(s->q, s->kv, IndexerMetadata{&s->split.decode, &p}, "prefill.max_query_len");
  expectError(s->q, s->kv, IndexerMetadata{&s->split.decode, nullptr}, "no prefill metadata");
  std::vector<int32_t> small(16);
  TensorView out = TensorView::contiguous(small.data(), DType::I32, {1, 1, 16});
  expectError(s->q, s->kv, s->md(), "topk_out: expected shape", &out);
}

// Sizes from the caller are multiplied (isContiguous, numel, offsets) only once their products are
// known to fit: a shape whose product passes 2^63 before a 0 made numel() overflow (UBSan) and
// isContiguous() compare wrapped strides.
TEST(Indexer, SizesWhoseProductsOverflowAreRefused) {
  auto s = makeStep(5, 2, 2, 1);
  auto indexer = warmIndexer(configFor(*s));
  auto expectError = [&](const TensorView &kv, const IndexerMetadata &md, const std::string &needle) {
    auto r = indexer->forward(s->q, kv, md, nullptr, nullptr);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  DecodeMetadata d = s->split.decode;
  d.blockTable.shape[0] = int64_t{3037000500};
  d.blockTable.shape[1] = int64_t{3037000500};
  d.blockTable.strides[0] = int64_t{3037000500};
  expectError(s->kv, IndexerMetadata{&d, &s->split.prefill},
              "decode.block_table: expected sizes and strides whose bytes fit in 64 bits");
  TensorView kv = s->kv;
  kv.shape[0] = int64_t{1} << 60; // 2^60 pages x 9216 bytes
  kv.strides[0] = 9216;
  expectError(kv, s->md(), "kv_cache: expected sizes and strides whose bytes fit in 64 bits");
}

// forward() from two threads at once on one host Indexer (issue 40: 16 of 40 outputs were wrong):
// each call, into its caller's top-k buffer, equals its step run alone.
TEST(Indexer, TwoThreadsEachGetTheirOwnForward) {
  auto a = makeStep(41, 2, 3, 2), b = makeStep(42, 2, 5, 1);
  auto indexer = warmIndexer(configFor(*a));
  auto alone = [&](const Step &s) {
    auto r = indexer->forward(s.q, s.kv, s.md());
    EXPECT_TRUE(r.ok()) << r.status().message();
    return copyTopk(*r);
  };
  const std::vector<int32_t> wantA = alone(*a), wantB = alone(*b);
  ASSERT_NE(wantA, wantB);
  auto run = [&](const Step &s, const std::vector<int32_t> &want, int *wrong) {
    std::vector<int32_t> out(want.size());
    const TensorView view = TensorView::contiguous(out.data(), DType::I32, {2, s.q.shape[0], 16});
    for (int i = 0; i < 20; ++i) {
      std::fill(out.begin(), out.end(), 12345);
      auto r = indexer->forward(s.q, s.kv, s.md(), nullptr, &view);
      *wrong += !r.ok() || out != want;
    }
  };
  int wrongA = 0, wrongB = 0, wrongC = 0;
  std::thread ta(run, std::cref(*a), std::cref(wantA), &wrongA), tb(run, std::cref(*b), std::cref(wantB), &wrongB),
      tc(run, std::cref(*b), std::cref(wantB), &wrongC);
  ta.join();
  tb.join();
  tc.join();
  EXPECT_EQ(wrongA, 0);
  EXPECT_EQ(wrongB, 0);
  EXPECT_EQ(wrongC, 0);
}
