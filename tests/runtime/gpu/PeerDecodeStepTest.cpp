// Decode CP's step across processes (runtime/gpu/PeerDecodeStep.h) on the stand-in CUDA driver
// and HIP runtime (each test runs on both, through their loaders), whose kernels do nothing and
// whose stream waits spin on host memory: four ranks (threads, each
// with its own GpuBackend) run many steps of the whole protocol without a deadlock, every rank's
// part ends holding every rank's query rows in rank order, and a rank whose process ends is named
// by the others' next step after their watchdogs release its waits. (The kernels' side, the scores
// and top-k of every rank equal to local ones, is tests/runtime/DeviceDecodeShareTest on the host
// backend; on a GPU, bench/gpu.sh.)
#include "runtime/gpu/PeerDecodeStep.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "casefile/CaseGenerator.h"
#include "core/Spec.h"
#include "tests/runtime/gpu/PeerGroup.h"
#include "tuning/TargetTuning.h"

using namespace m3idx;
using namespace m3idx::runtime;
using namespace m3idx::peer_tests;
using namespace std::chrono_literals;

namespace {

constexpr int kWorld = 4;

struct Rank {
  const DeviceApi *api = nullptr;
  std::unique_ptr<GpuBackend> backend;
  std::unique_ptr<PeerDecodeStep> cp;
  DeviceTensors io;
  DeviceWorkspace ws;
  std::string error;
  ~Rank() {
    for (uint64_t at : {io.q, io.kv, io.blockTable, io.seqLens, io.topk, ws.base})
      if (at)
        api->free(at);
  }
};

// Fills `k`: a rank's backend, CP group and buffers for `shape` (its q rows hold rank * 16 + row).
void makeRank(Rank &k, const DeviceApi &api, const std::string &group, int r, const BatchView &shape, int64_t W) {
  k.api = &api;
  auto backend = GpuBackend::create(&api, "cuda", 0, 32,
                                    [](const dsl::Kernel &, const kernels::KernelConfig &) -> StatusOr<std::string> {
                                      return std::string("image");
                                    },
                                    **tuning::tuningFor("sm_90"));
  if (!backend.ok()) {
    k.error = backend.status().message();
    return;
  }
  k.backend = std::move(*backend);
  const int64_t T = shape.numRows;
  PeerDecodeStep::Capacity capacity{T, W, k.backend->tuning().mostDecodeScorePrograms() + T};
  auto cp = PeerDecodeStep::create(api, 0, group, r, kWorld, capacity, 10s);
  if (!cp.ok()) {
    k.error = cp.status().message();
    return;
  }
  k.cp = std::move(*cp);
  std::vector<uint8_t> q(T * spec::kIndexHeadDim);
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = static_cast<uint8_t>(r * 16 + i / spec::kIndexHeadDim);
  api.alloc(&k.io.q, q.size());
  api.upload(k.io.q, q.data(), q.size());
  for (uint64_t *at : {&k.io.kv, &k.io.blockTable, &k.io.seqLens, &k.io.topk})
    api.alloc(at, 1 << 16);
  k.ws.layout = k.backend->tuning().decodeWorkspace(1, T, W);
  api.alloc(&k.ws.base, k.ws.layout.bytes);
}

BatchView decodeShape() {
  GenOptions o;
  o.numDecodes = 4;
  o.numPrefills = 0;
  o.decodeContext = {1, 3000};
  static const Case c = *generateCase(o);
  return c.view();
}

class PeerDecodeStepOnStandIn : public ::testing::TestWithParam<StandIn> {};

} // namespace

INSTANTIATE_TEST_SUITE_P(Platforms, PeerDecodeStepOnStandIn, ::testing::ValuesIn(kStandIns), standInName);

TEST_P(PeerDecodeStepOnStandIn, FourRanksRunManyStepsAndGatherEveryRanksQueries) {
  const DeviceApi &api = GetParam().api();
  const BatchView shape = decodeShape();
  const int64_t W = 64, T = shape.numRows;
  const std::string group = rank_tests::uniqueGroup();
  std::atomic<int> done{0};
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r)
    threads.emplace_back([&, r] {
      Rank k;
      makeRank(k, api, group, r, shape, W);
      std::string &error = errors[r];
      error = k.error;
      for (int step = 0; step < 40 && error.empty(); ++step)
        if (Status s = k.cp->enqueue(*k.backend, shape, W, 3000, k.io, k.ws, nullptr); !s.ok())
          error = s.message();
      done.fetch_add(1);
      while (done.load() < kWorld) // the last step's pushes are all in before any rank reads
        std::this_thread::yield();
      if (!error.empty())
        return;
      std::vector<uint8_t> got(T * kWorld * spec::kIndexHeadDim);
      api.download(got.data(), k.cp->groupQueries(), got.size());
      for (size_t i = 0; i < got.size() && error.empty(); ++i) {
        const size_t row = i / (kWorld * spec::kIndexHeadDim), head = i / spec::kIndexHeadDim % kWorld;
        if (got[i] != head * 16 + row)
          error = fmt::format("byte {} of the group's queries is {}", i, got[i]);
      }
      done.fetch_add(1);
      while (done.load() < 2 * kWorld) // no rank unmaps its part while another reads
        std::this_thread::yield();
    });
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST_P(PeerDecodeStepOnStandIn, ARankThatEndsIsNamedByTheOthers) {
  const DeviceApi &api = GetParam().api();
  ::setenv(GetParam().waitLimitVar, "3000", 1); // a wait never released fails in 3 s, not 10
  const BatchView shape = decodeShape();
  const std::string group = rank_tests::uniqueGroup();
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r)
    threads.emplace_back([&, r] {
      Rank k;
      makeRank(k, api, group, r, shape, 64);
      if (!k.error.empty()) {
        errors[r] = k.error;
        return;
      }
      for (int step = 0; step < 3; ++step)
        if (Status s = k.cp->enqueue(*k.backend, shape, 64, 3000, k.io, k.ws, nullptr); !s.ok()) {
          errors[r] = "step " + std::to_string(step) + ": " + s.message();
          return;
        }
      if (r == 3)
        return; // its group ends with it, as with its process
      // Rank 1 sees the end first and refuses its next step; ranks 0 and 2 queue theirs at once,
      // which waits for rank 3's words and rank 1's until their watchdogs release them (on a GPU,
      // releasing rank 3's alone had left them waiting for rank 1 forever); their next step is
      // refused, naming rank 3, within a bounded time.
      const auto start = std::chrono::steady_clock::now();
      if (r == 1)
        while (k.cp->departed() < 0 && std::chrono::steady_clock::now() - start < 5s)
          std::this_thread::sleep_for(1ms);
      Status s;
      while (s.ok() && std::chrono::steady_clock::now() - start < 5s)
        s = k.cp->enqueue(*k.backend, shape, 64, 3000, k.io, k.ws, nullptr);
      errors[r] = s.message();
      std::this_thread::sleep_for(200ms); // peers still read this rank's part until their refusal
    });
  for (std::thread &t : threads)
    t.join();
  ::unsetenv(GetParam().waitLimitVar);
  EXPECT_EQ(errors[3], "");
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(errors[r].find("rank 3 of the group has left"), std::string::npos) << "rank " << r << ": " << errors[r];
}
