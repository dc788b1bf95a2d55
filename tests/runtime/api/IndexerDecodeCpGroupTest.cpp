// Indexer::joinDecodeCpGroup on the stand-in CUDA driver (kernels do nothing; the protocol's
// values are checked in tests/runtime/gpu/PeerDecodeStepTest and the kernels' in
// tests/runtime/DeviceDecodeShareTest): four ranks' Indexers, each of one head, join a group and
// their decode() steps of decode_query_len 4 are scored context-parallel, eager steps one after
// another on each rank; a step SPEC §6 does not allow (decode_query_len 2) is scored locally; bad
// groups and a host indexer are refused naming why.
#include <atomic>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "core/Spec.h"
#include "runtime/api/IndexerEngine.h"
#include "runtime/gpu/GpuBackend.h"
#include "tests/runtime/comm/RankGroup.h"
#include "tests/runtime/gpu/PeerGroup.h"
#include "tuning/TargetTuning.h"

using namespace m3idx;

namespace {

constexpr int kWorld = 4;

IndexerConfig groupConfig() {
  IndexerConfig c;
  c.numIndexHeads = 1;
  c.maxNumDecodes = 4;
  c.maxDecodeQueryLen = 4;
  c.maxModelLen = 4096;
  return c;
}

std::unique_ptr<Indexer> fakeCudaIndexer(const runtime::DeviceApi &api) {
  auto backend = runtime::GpuBackend::create(&api, "cuda", 0, 32,
                                             [](const dsl::Kernel &, const kernels::KernelConfig &)
                                                 -> StatusOr<std::string> { return std::string("image"); },
                                             **tuning::tuningFor("sm_90"));
  EXPECT_TRUE(backend.ok()) << backend.status().message();
  auto indexer = createIndexer(groupConfig(), Device{DeviceKind::Cuda, 0},
                               makeGpuIndexerEngine(groupConfig(), std::move(*backend)));
  EXPECT_TRUE(indexer.ok()) << indexer.status().message();
  return std::move(*indexer);
}

// A decode step's device tensors of D requests x Q rows on the stand-in's memory.
struct DecodeTensors {
  const runtime::DeviceApi &api;
  TensorView q, kv, table, lens;
  ~DecodeTensors() {
    for (const TensorView *t : {&q, &kv, &table, &lens})
      api.free(reinterpret_cast<uint64_t>(t->data));
  }
  DecodeTensors(const runtime::DeviceApi &api, int64_t D, int64_t Q) : api(api) {
    const Device cuda{DeviceKind::Cuda, 0};
    uint64_t at[4];
    const size_t bytes[4] = {static_cast<size_t>(D * Q * 128), 4 * spec::kPageBytes, static_cast<size_t>(D * 32 * 4),
                             static_cast<size_t>(D * 4)};
    for (int i = 0; i < 4; ++i) {
      api.alloc(&at[i], bytes[i]);
      std::memset(reinterpret_cast<void *>(at[i]), 0, bytes[i]); // stand-in memory is the host's
    }
    q = TensorView::contiguous(reinterpret_cast<void *>(at[0]), DType::U8, {D * Q, 1, 128}, cuda);
    kv = TensorView::contiguous(reinterpret_cast<void *>(at[1]), DType::U8, {4, spec::kPageBytes}, cuda);
    table = TensorView::contiguous(reinterpret_cast<void *>(at[2]), DType::I32, {D, 32}, cuda);
    lens = TensorView::contiguous(reinterpret_cast<void *>(at[3]), DType::I32, {D}, cuda);
  }
};

} // namespace

TEST(IndexerDecodeCpGroupOnStandIn, DecodeStepsOfFourRowsAreScoredByTheGroup) {
  const runtime::DeviceApi &api = peer_tests::fakeDriver();
  const std::string group = rank_tests::uniqueGroup();
  std::vector<std::string> errors(kWorld);
  std::atomic<int> done{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.emplace_back([&, r] {
      std::unique_ptr<Indexer> indexer = fakeCudaIndexer(api);
      std::string &error = errors[r];
      Status s = indexer->joinDecodeCpGroup({group, r, kWorld, 10000});
      if (s.ok())
        s = indexer->warmup();
      if (!s.ok()) {
        error = s.message();
        done.fetch_add(1); // no rank waits for this one
        return;
      }
      DecodeTensors four(api, 4, 4), two(api, 4, 2);
      for (int step = 0; step < 10 && error.empty(); ++step) {
        auto out = indexer->decode(four.q, four.kv, four.table, four.lens);
        if (!out.ok())
          error = out.status().message();
        else if (!indexer->decodeCpActive())
          error = fmt::format("step {} was not scored by the group", step);
      }
      auto local = indexer->decode(two.q, two.kv, two.table, two.lens);
      if (error.empty() && (!local.ok() || indexer->decodeCpActive()))
        error = local.ok() ? "decode_query_len 2 was scored by the group" : local.status().message();
      if (error.empty() && indexer->compilesAfterWarmup() != 2) // score and top-k of Q = 2: the CP kernels were warm
        error = fmt::format("{} kernels after warm-up", indexer->compilesAfterWarmup());
      // Every rank ends its steps before any unmaps its part.
      done.fetch_add(1);
      while (done.load() < kWorld)
        std::this_thread::yield();
    });
  for (std::thread &t : ranks)
    t.join();
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(IndexerDecodeCpGroupOnStandIn, BadGroupsAndHostIndexersAreNamed) {
  const runtime::DeviceApi &api = peer_tests::fakeDriver();
  std::unique_ptr<Indexer> indexer = fakeCudaIndexer(api);
  auto message = [&](DecodeCpGroup g) { return indexer->joinDecodeCpGroup(g).message(); };
  EXPECT_NE(message({"g", 4, 4, 1000}).find("decode CP group"), std::string::npos);
  EXPECT_NE(message({"g", 0, 1, 1000}).find("decode CP group"), std::string::npos);
  EXPECT_NE(message({"g", 0, 4, 0}).find("decode CP group timeout"), std::string::npos);
  EXPECT_NE(message({"bad name!", 0, 2, 1000}).find("group"), std::string::npos) << message({"bad name!", 0, 2, 1000});
  auto host = Indexer::create(groupConfig(), Device{});
  ASSERT_TRUE(host.ok());
  const std::string m = (*host)->joinDecodeCpGroup({"g", 0, 4, 1000}).message();
  EXPECT_NE(m.find("GPU indexers only"), std::string::npos) << m;
}
