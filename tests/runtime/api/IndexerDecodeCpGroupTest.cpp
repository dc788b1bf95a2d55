// DecodeCp and Indexer::joinDecodeCp on the stand-in CUDA driver (kernels do nothing; the
// protocol's values are checked in tests/runtime/gpu/PeerDecodeStepTest and the kernels' in
// tests/runtime/DeviceDecodeShareTest): four ranks each make one DecodeCp and two Indexers of one
// head (two layers) join it; their decode() steps of decode_query_len 4, and forward()'s decode
// rows, are scored context-parallel, the layers' steps one after another on each rank; a step
// SPEC §6 does not allow (decode_query_len 2, dual-batch overlap) is scored locally; bad groups,
// joins and a host indexer are refused naming why.
#include <atomic>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "core/Spec.h"
#include "runtime/api/DecodeCpImpl.h"
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


// The group's DecodeCp for every rank, made on the ranks' threads (the call is collective).
std::vector<std::shared_ptr<DecodeCp>> makeGroup(const std::string &name, int64_t maxModelLen,
                                                 std::vector<std::string> &errors) {
  ::setenv("M3IDX_CUDA_LIBRARY", M3IDX_FAKE_CUDA, 1); // DecodeCp::create loads the driver
  std::vector<std::shared_ptr<DecodeCp>> cps(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.emplace_back([&, r] {
      auto cp = DecodeCp::create({name, r, kWorld, 10000, maxModelLen}, Device{DeviceKind::Cuda, 0});
      if (cp.ok())
        cps[r] = *cp;
      else
        errors[r] = cp.status().message();
    });
  for (std::thread &t : ranks)
    t.join();
  ::unsetenv("M3IDX_CUDA_LIBRARY");
  return cps;
}

// forward()'s host metadata of a decode step: D requests of seq_len 300, decode_query_len Q.
struct HostDecodeMetadata {
  std::vector<int32_t> table, lens;
  DecodeMetadata md;
  HostDecodeMetadata(int64_t D, int Q) : table(D * 32, 0), lens(D, 300) {
    md.blockTable = TensorView::contiguous(table.data(), DType::I32, {D, 32}, Device{});
    md.seqLens = TensorView::contiguous(lens.data(), DType::I32, {D}, Device{});
    md.decodeQueryLen = Q;
    md.maxSeqLen = 300;
  }
};

} // namespace

TEST(IndexerDecodeCpGroupOnStandIn, TwoLayersShareTheGroupForDecodeAndForward) {
  const runtime::DeviceApi &api = peer_tests::fakeDriver();
  std::vector<std::string> errors(kWorld);
  std::vector<std::shared_ptr<DecodeCp>> cps = makeGroup(rank_tests::uniqueGroup(), 4096, errors);
  std::atomic<int> done{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.emplace_back([&, r] {
      std::string &error = errors[r];
      std::unique_ptr<Indexer> layers[2] = {fakeCudaIndexer(api), fakeCudaIndexer(api)};
      for (int l = 0; l < 2 && error.empty(); ++l) {
        Status s = layers[l]->joinDecodeCp(cps[r]);
        if (s.ok())
          s = layers[l]->warmup();
        if (!s.ok())
          error = s.message();
      }
      if (const std::string again = layers[0]->joinDecodeCp(cps[r]).message();
          error.empty() && again.find("joined a group already") == std::string::npos)
        error = "a second join: " + again;
      cps[r].reset(); // the indexers hold the group now
      DecodeTensors four(api, 4, 4), two(api, 4, 2);
      HostDecodeMetadata host(4, 4);
      IndexerMetadata md;
      md.decode = &host.md;
      for (int step = 0; step < 10 && error.empty(); ++step) {
        Indexer &layer = *layers[step % 2];
        if (auto out = layer.decode(four.q, four.kv, four.table, four.lens); !out.ok())
          error = out.status().message();
        else if (!layer.decodeCpActive())
          error = fmt::format("decode step {} was not scored by the group", step);
        else if (auto f = layer.forward(four.q, four.kv, md); !f.ok())
          error = f.status().message();
        else if (!layer.decodeCpActive())
          error = fmt::format("forward step {} was not scored by the group", step);
      }
      auto local = layers[0]->decode(two.q, two.kv, two.table, two.lens);
      if (error.empty() && (!local.ok() || layers[0]->decodeCpActive()))
        error = local.ok() ? "decode_query_len 2 was scored by the group" : local.status().message();
      md.dualBatchOverlap = true;
      auto overlapped = layers[1]->forward(four.q, four.kv, md);
      if (error.empty() && (!overlapped.ok() || layers[1]->decodeCpActive()))
        error = overlapped.ok() ? "a dual-batch-overlap step was scored by the group" : overlapped.status().message();
      if (error.empty() && layers[0]->compilesAfterWarmup() != 2) // score and top-k of Q = 2: the CP kernels were warm
        error = fmt::format("{} kernels after warm-up", layers[0]->compilesAfterWarmup());
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

TEST(IndexerDecodeCpGroupOnStandIn, BadGroupsJoinsAndHostIndexersAreNamed) {
  const runtime::DeviceApi &api = peer_tests::fakeDriver();
  const Device cuda{DeviceKind::Cuda, 0};
  auto message = [&](DecodeCpGroup g, Device d) {
    auto cp = DecodeCp::create(g, d);
    return cp.ok() ? std::string("made") : cp.status().message();
  };
  EXPECT_NE(message({"g", 4, 4, 1000}, cuda).find("decode CP group"), std::string::npos);
  EXPECT_NE(message({"g", 0, 1, 1000}, cuda).find("decode CP group"), std::string::npos);
  EXPECT_NE(message({"g", 0, 4, 0}, cuda).find("decode CP group timeout"), std::string::npos);
  EXPECT_NE(message({"g", 0, 4, 1000, 0}, cuda).find("decode CP max_model_len"), std::string::npos);
  EXPECT_NE(message({"g", 0, 4, 1000, (1 << 20) + 1}, cuda).find("decode CP max_model_len"), std::string::npos);
  EXPECT_NE(message({"g", 0, 4, 1000}, Device{}).find("decode CP device"), std::string::npos);
  ::setenv("M3IDX_CUDA_LIBRARY", M3IDX_FAKE_CUDA, 1);
  const std::string badName = message({"bad name!", 0, 2, 1000}, cuda);
  ::unsetenv("M3IDX_CUDA_LIBRARY");
  EXPECT_NE(badName.find("group"), std::string::npos) << badName;

  std::vector<std::string> errors(kWorld);
  std::vector<std::shared_ptr<DecodeCp>> cps = makeGroup(rank_tests::uniqueGroup(), 2048, errors);
  for (int r = 0; r < kWorld; ++r)
    ASSERT_EQ(errors[r], "") << "rank " << r;
  EXPECT_EQ(cps[0]->departedRank(), -1);
  EXPECT_EQ(cps[0]->group().maxModelLen, 2048);
  std::unique_ptr<Indexer> indexer = fakeCudaIndexer(api); // max_model_len 4096
  std::string m = indexer->joinDecodeCp(cps[0]).message();
  EXPECT_NE(m.find("indexer max_model_len"), std::string::npos) << m;
  m = indexer->joinDecodeCp(nullptr).message();
  EXPECT_NE(m.find("DecodeCp::create"), std::string::npos) << m;
  auto host = Indexer::create(groupConfig(), Device{});
  ASSERT_TRUE(host.ok());
  m = (*host)->joinDecodeCp(cps[0]).message();
  EXPECT_NE(m.find("GPU indexers only"), std::string::npos) << m;
}

// DecodeCp::Impl::enqueue orders eager steps across streams: a step on another stream than the
// last waits for the last one's event; a captured step waits for nothing (a capture cannot).
TEST(IndexerDecodeCpGroupOnStandIn, EagerStepsOnAnotherStreamWaitForTheLast) {
  const runtime::DeviceApi &fake = peer_tests::fakeDriver();
  const std::string group = rank_tests::uniqueGroup();
  std::vector<std::string> errors(kWorld);
  std::vector<std::vector<std::pair<void *, void *>>> waits(kWorld); // per rank: (stream, event)
  std::atomic<int> done{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.emplace_back([&, r] {
      runtime::DeviceApi api = fake; // this rank's, recording its stream waits
      api.streamWaitEvent = [&waits, r](void *stream, void *event) {
        waits[r].push_back({stream, event});
        return 0;
      };
      std::string &error = errors[r];
      auto backend = runtime::GpuBackend::create(&api, "cuda", 0, 32,
                                                 [](const dsl::Kernel &, const kernels::KernelConfig &)
                                                     -> StatusOr<std::string> { return std::string("image"); },
                                                 **tuning::tuningFor("sm_90"));
      const int64_t T = 16, W = 64;
      auto step = runtime::PeerDecodeStep::create(api, 0, group, r, kWorld,
                                                  {T, W, (*backend)->tuning().mostDecodeScorePrograms() + T},
                                                  std::chrono::seconds(10));
      if (!step.ok()) {
        error = step.status().message();
        done.fetch_add(1);
        return;
      }
      DecodeCp::Impl cp({group, r, kWorld}, Device{DeviceKind::Cuda, 0}, api, std::move(*step));
      DecodeTensors four(api, 4, 4);
      BatchView shape;
      shape.params.numHeads = 1;
      shape.params.numDecodes = 4;
      shape.params.decodeQueryLen = 4;
      shape.numRows = T;
      shape.q = static_cast<const uint8_t *>(four.q.data);
      shape.kv = static_cast<const uint8_t *>(four.kv.data);
      shape.numPages = 4;
      shape.blockTable = static_cast<const int32_t *>(four.table.data);
      shape.numRequests = 4;
      shape.maxBlocks = 32;
      shape.seqLens = static_cast<const int32_t *>(four.lens.data);
      runtime::DeviceTensors io{reinterpret_cast<uint64_t>(four.q.data), reinterpret_cast<uint64_t>(four.kv.data), 0,
                                reinterpret_cast<uint64_t>(four.table.data), reinterpret_cast<uint64_t>(four.lens.data)};
      uint64_t wsBase = 0;
      const kernels::DecodeWorkspaceLayout layout = (*backend)->tuning().decodeWorkspace(1, T, W);
      api.alloc(&wsBase, layout.bytes);
      const runtime::DeviceWorkspace ws{wsBase, layout};
      void *const one = reinterpret_cast<void *>(0x10), *const two = reinterpret_cast<void *>(0x20);
      // eager on one, one (no wait), two (waits), captured on one (no wait), eager on two (no wait)
      const std::pair<void *, bool> steps[] = {{one, false}, {one, false}, {two, false}, {one, true}, {two, false}};
      for (const auto &[stream, captured] : steps)
        if (Status st = cp.enqueue(**backend, shape, W, 300, io, ws, stream, captured); error.empty() && !st.ok())
          error = st.message();
      done.fetch_add(1);
      while (done.load() < kWorld) // no rank unmaps its part while another still steps
        std::this_thread::yield();
      api.free(wsBase);
      if (error.empty() && (waits[r].size() != 1 || waits[r][0].first != two))
        error = fmt::format("{} stream waits, the first on {}", waits[r].size(),
                            waits[r].empty() ? nullptr : waits[r][0].first);
    });
  for (std::thread &t : ranks)
    t.join();
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}
