// One array over four ranks' memory (runtime/gpu/PeerArray.h) on the stand-in CUDA driver, whose
// shareable memory is a memfd and whose address ranges are host reservations: each rank (a thread
// here, with its own exchange) writes its part, and every rank reads all four parts through its own
// mapping, and rows each pushes into every part land as that part's column; ordered words written
// into a peer's part are seen by the peer's wait. Ranks asking for
// different sizes, and a driver without shareable memory, are errors naming the problem
// (PeerArrayOnStandIn: the build tree's stand-in, left out of the GPU test bundle). The four ranks
// also run on a machine's CUDA driver where there is a GPU (PeerArray.FourRanksOnTheCudaDriver).
#include "runtime/gpu/PeerArray.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/cuda/CudaDriver.h"
#include "tests/runtime/gpu/PeerGroup.h"

using namespace m3idx;
using namespace m3idx::runtime;
using namespace m3idx::peer_tests;
using namespace std::chrono_literals;

namespace {

// Four ranks write their parts and read all four through their own mappings; with `words`, each
// also ends the next rank's wait on a word in its part (the stand-in only: on a GPU the four
// threads share one context's default stream, where a wait queued first would block the write).
void fourRanksShareTheirParts(const DeviceApi &api, bool openDevice, bool words) {
  constexpr int kWorld = 4;
  // Counted barriers: a rank whose array failed arrives at both at once, so none waits for it.
  std::atomic<int> written{0}, pushed{0}, read{0};
  auto arriveAndWait = [](std::atomic<int> &count) {
    count.fetch_add(1);
    while (count.load() < kWorld)
      std::this_thread::yield();
  };
  std::vector<std::string> errors = onRanks(kWorld, [&](int r, comm::FdExchange &x) -> std::string {
    std::string name;
    auto a = openDevice && api.openDevice(0, &name) != 0 ? StatusOr<std::unique_ptr<PeerArray>>(Status::error("openDevice"))
                                                         : PeerArray::create(api, 0, x, 1000, 10s);
    if (!a.ok()) {
      written.fetch_add(1);
      pushed.fetch_add(1);
      read.fetch_add(1);
      return a.status().message();
    }
    PeerArray &pa = **a;
    std::string wrong;
    size_t granularity = 0;
    api.shared.granularity(0, &granularity);
    if (pa.stride() != granularity || pa.ranks() != kWorld)
      wrong = fmt::format("stride {} (granularity {}), ranks {}; ", pa.stride(), granularity, pa.ranks());
    std::vector<int32_t> mine(250, 1000 * r);
    if (Status s = api.check(api.upload(pa.part(r), mine.data(), 1000), "upload"); !s.ok())
      wrong += s.message() + "; ";
    arriveAndWait(written);
    for (int p = 0; p < kWorld; ++p) {
      std::vector<int32_t> got(250, -1);
      (void)api.download(got.data(), pa.part(p), 1000);
      if (got != std::vector<int32_t>(250, 1000 * p))
        wrong += fmt::format("part {} reads {}; ", p, got[0]);
    }
    // Rows pushed into every part (decode CP's query gather): rank r's 8 rows of 16 bytes become
    // column r of each part's [8, 4, 16] region, by one copyRowsAsync a part.
    constexpr size_t kRegion = 4096, kRowBytes = 16, kRows = 8;
    std::vector<uint8_t> rows(kRows * kRowBytes);
    for (size_t i = 0; i < rows.size(); ++i)
      rows[i] = static_cast<uint8_t>(r * 64 + i / kRowBytes);
    uint64_t src = 0;
    if (api.alloc(&src, rows.size()) != 0 || api.upload(src, rows.data(), rows.size()) != 0)
      wrong += "source rows; ";
    for (int p = 0; p < kWorld && src; ++p)
      if (api.copyRowsAsync(pa.part(p) + kRegion + r * kRowBytes, kWorld * kRowBytes, src, kRowBytes, kRowBytes, kRows,
                            nullptr) != 0)
        wrong += fmt::format("copyRowsAsync into part {} failed; ", p);
    (void)api.streamSynchronize(nullptr);
    arriveAndWait(pushed);
    std::vector<uint8_t> region(kRows * kWorld * kRowBytes);
    (void)api.download(region.data(), pa.part(r) + kRegion, region.size());
    for (size_t i = 0; i < region.size(); ++i) {
      const size_t row = i / (kWorld * kRowBytes), column = i / kRowBytes % kWorld;
      if (region[i] != static_cast<uint8_t>(column * 64 + row)) {
        wrong += fmt::format("pushed rows: byte {} of part {} is {}; ", i, r, region[i]);
        break;
      }
    }
    if (src)
      (void)api.free(src);
    if (words) {
      if (api.writeWord(nullptr, pa.part((r + 1) % kWorld) + 2048, 7 + r) != 0)
        wrong += "writeWord failed; ";
      if (api.waitWordEquals(nullptr, pa.part(r) + 2048, 7 + (r + kWorld - 1) % kWorld) != 0)
        wrong += "waitWordEquals failed; ";
    }
    arriveAndWait(read); // no rank unmaps a part another still reads
    return wrong;
  });
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

} // namespace

TEST(PeerArrayOnStandIn, FourRanksSeeEveryPartThroughTheirOwnMapping) {
  const DeviceApi &api = fakeDriver();
  ASSERT_TRUE(api.hasSharedMemory());
  ASSERT_TRUE(api.waitWordEquals && api.writeWord);
  fourRanksShareTheirParts(api, false, true);
}

// The same on the machine's CUDA driver and GPU 0, where there are both (the test bundle on a GPU
// machine, bench/gpu.sh tests): cuda.h's structures as CudaDriver.cpp declares them.
TEST(PeerArray, FourRanksOnTheCudaDriver) {
  StatusOr<const DeviceApi *> api = cuda::loadDriver();
  std::string name;
  if (!api.ok() || (*api)->openDevice(0, &name) != 0)
    GTEST_SKIP() << "no CUDA driver or GPU here: runs on GPU machines (bench/gpu.sh tests)";
  ASSERT_TRUE((*api)->hasSharedMemory()) << (*api)->library;
  fourRanksShareTheirParts(**api, true, false);
}

TEST(PeerArrayOnStandIn, RanksAskingForDifferentSizesAreRefused) {
  const DeviceApi &api = fakeDriver();
  std::vector<std::string> errors = onRanks(2, [&](int r, comm::FdExchange &x) -> std::string {
    auto a = PeerArray::create(api, 0, x, r == 0 ? 1000 : 100000, 10s);
    return a.ok() ? "created" : a.status().message();
  });
  EXPECT_NE(errors[0].find("rank 1 shares 131072 bytes a part and rank 0 65536"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("must ask for the same size"), std::string::npos) << errors[1];
}

TEST(PeerArrayOnStandIn, ADriverWithoutSharedMemoryIsNamed) {
  DeviceApi api = fakeDriver();
  api.shared = {};
  std::vector<std::string> errors = onRanks(2, [&](int, comm::FdExchange &x) -> std::string {
    auto a = PeerArray::create(api, 0, x, 1000, 1s);
    return a.ok() ? "created" : a.status().message();
  });
  EXPECT_NE(errors[0].find("shares no device memory between processes"), std::string::npos) << errors[0];
}

TEST(PeerArrayOnStandIn, ADriverRefusingShareableMemoryIsNamed) {
  const DeviceApi &api = fakeDriver();
  ::setenv("M3IDX_FAKE_CUDA_NO_VMM", "1", 1);
  std::vector<std::string> errors = onRanks(2, [&](int, comm::FdExchange &x) -> std::string {
    auto a = PeerArray::create(api, 0, x, 1000, 1s);
    return a.ok() ? "created" : a.status().message();
  });
  ::unsetenv("M3IDX_FAKE_CUDA_NO_VMM");
  EXPECT_NE(errors[0].find("CUDA create shareable memory failed"), std::string::npos) << errors[0];
}
