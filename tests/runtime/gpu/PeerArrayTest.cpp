// One array over four ranks' memory (runtime/gpu/PeerArray.h) on the stand-in CUDA driver, whose
// shareable memory is a memfd and whose address ranges are host reservations: each rank (a thread
// here, with its own exchange) writes its part, and every rank reads all four parts through its own
// mapping; ordered words written into a peer's part are seen by the peer's wait. Ranks asking for
// different sizes, and a driver without shareable memory, are errors naming the problem. No GPU
// runs this (bench/ipc_push_probe.cu is the one that did, with four processes on an H100).
#include "runtime/gpu/PeerArray.h"

#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/cuda/CudaDriver.h"

using namespace m3idx;
using namespace m3idx::runtime;
using namespace std::chrono_literals;

namespace {

const DeviceApi &fakeDriver() {
  ::setenv("M3IDX_CUDA_LIBRARY", M3IDX_FAKE_CUDA, 1);
  StatusOr<const DeviceApi *> api = cuda::loadDriver();
  ::unsetenv("M3IDX_CUDA_LIBRARY");
  EXPECT_TRUE(api.ok()) << api.status().message();
  return **api;
}

std::string uniqueGroup() {
  static std::atomic<int> n{0};
  return fmt::format("pa{}-{}", ::getpid(), n++);
}

// Runs body(rank, exchange) on `world` threads connected as one group; returns each one's error.
template <typename Body> std::vector<std::string> onRanks(int world, Body body) {
  const std::string group = uniqueGroup();
  std::vector<std::string> errors(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      auto x = comm::FdExchange::connect(group, r, world, 10s);
      if (!x.ok()) {
        errors[r] = x.status().message();
        return;
      }
      errors[r] = body(r, **x);
    });
  for (std::thread &t : ranks)
    t.join();
  return errors;
}

} // namespace

TEST(PeerArray, FourRanksSeeEveryPartThroughTheirOwnMapping) {
  const DeviceApi &api = fakeDriver();
  ASSERT_TRUE(api.hasSharedMemory());
  ASSERT_TRUE(api.waitWordEquals && api.writeWord);
  constexpr int kWorld = 4;
  std::barrier written(kWorld), read(kWorld);
  std::vector<std::string> errors = onRanks(kWorld, [&](int r, comm::FdExchange &x) -> std::string {
    auto a = PeerArray::create(api, 0, x, 1000, 10s);
    if (!a.ok()) {
      written.arrive_and_drop();
      read.arrive_and_drop();
      return a.status().message();
    }
    PeerArray &pa = **a;
    if (pa.stride() != 65536 || pa.ranks() != kWorld) // the stand-in's granularity
      return fmt::format("stride {}, ranks {}", pa.stride(), pa.ranks());
    std::vector<int32_t> mine(250, 1000 * r);
    if (Status s = api.check(api.upload(pa.part(r), mine.data(), 1000), "upload"); !s.ok())
      return s.message();
    written.arrive_and_wait();
    std::string wrong;
    for (int p = 0; p < kWorld; ++p) {
      std::vector<int32_t> got(250, -1);
      (void)api.download(got.data(), pa.part(p), 1000);
      if (got != std::vector<int32_t>(250, 1000 * p))
        wrong += fmt::format("part {} reads {}; ", p, got[0]);
    }
    // A word in the next rank's part, written in stream order, ends that rank's wait on it.
    const uint64_t word = pa.part((r + 1) % kWorld) + 2048;
    if (api.writeWord(nullptr, word, 7 + r) != 0)
      wrong += "writeWord failed; ";
    if (api.waitWordEquals(nullptr, pa.part(r) + 2048, 7 + (r + kWorld - 1) % kWorld) != 0)
      wrong += "waitWordEquals failed; ";
    read.arrive_and_wait(); // no rank unmaps a part another still reads
    return wrong;
  });
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(PeerArray, RanksAskingForDifferentSizesAreRefused) {
  const DeviceApi &api = fakeDriver();
  std::vector<std::string> errors = onRanks(2, [&](int r, comm::FdExchange &x) -> std::string {
    auto a = PeerArray::create(api, 0, x, r == 0 ? 1000 : 100000, 10s);
    return a.ok() ? "created" : a.status().message();
  });
  EXPECT_NE(errors[0].find("rank 1 shares 131072 bytes a part and rank 0 65536"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("must ask for the same size"), std::string::npos) << errors[1];
}

TEST(PeerArray, ADriverWithoutSharedMemoryIsNamed) {
  DeviceApi api = fakeDriver();
  api.shared = {};
  std::vector<std::string> errors = onRanks(2, [&](int, comm::FdExchange &x) -> std::string {
    auto a = PeerArray::create(api, 0, x, 1000, 1s);
    return a.ok() ? "created" : a.status().message();
  });
  EXPECT_NE(errors[0].find("shares no device memory between processes"), std::string::npos) << errors[0];
}

TEST(PeerArray, ADriverRefusingShareableMemoryIsNamed) {
  const DeviceApi &api = fakeDriver();
  ::setenv("M3IDX_FAKE_CUDA_NO_VMM", "1", 1);
  std::vector<std::string> errors = onRanks(2, [&](int, comm::FdExchange &x) -> std::string {
    auto a = PeerArray::create(api, 0, x, 1000, 1s);
    return a.ok() ? "created" : a.status().message();
  });
  ::unsetenv("M3IDX_FAKE_CUDA_NO_VMM");
  EXPECT_NE(errors[0].find("CUDA create shareable memory failed"), std::string::npos) << errors[0];
}
