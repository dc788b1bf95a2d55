// The order of a group's steps on a PeerArray (runtime/gpu/PeerStepOrder.h) on the stand-in CUDA
// driver, whose stream waits spin on host memory: four ranks (threads) each write a slice into every
// peer's part and read their own part, for many steps, at uneven speeds; every read sees exactly
// its step's values (a rank that wrote into a part before its owner had read the last step, or
// read before every peer had written, would see another step's). A rank that ends mid-run leaves
// its peer waiting until the peer's watchdog releases the waits.
#include "runtime/gpu/PeerStepOrder.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "tests/runtime/gpu/PeerGroup.h"

using namespace m3idx;
using namespace m3idx::runtime;
using namespace m3idx::peer_tests;
using namespace std::chrono_literals;

namespace {

constexpr size_t kSliceInts = 256; // rank q's slice of every part: [q * 256, + 256) ints
constexpr size_t kFirstAt = 4096;  // bytes: the first round's slices, as the second's
constexpr size_t kWordsAt = 8192;  // bytes: the step words, after both rounds' four slices

std::vector<int32_t> sliceOf(int step, int writer) { return std::vector<int32_t>(kSliceInts, step * 16 + writer); }

// Runs body(rank, exchange, array, order) -> error text on `world` ranks, each with an array whose
// parts hold the slices and the step words, and the order over them.
template <typename Body> std::vector<std::string> onOrderedRanks(const DeviceApi &api, int world, Body body) {
  return onRanks(world, [&](int r, comm::FdExchange &x) -> std::string {
    auto a = PeerArray::create(api, 0, x, kWordsAt + PeerStepOrder::wordBytes(world), 10s);
    if (!a.ok())
      return a.status().message();
    auto order = PeerStepOrder::create(api, **a, x, kWordsAt, 10s);
    if (!order.ok())
      return order.status().message();
    return body(r, x, **a, **order);
  });
}

} // namespace

TEST(PeerStepOrderOnStandIn, ManyStepsAtUnevenSpeedsReadOnlyTheirOwnStep) {
  const DeviceApi &api = fakeDriver();
  constexpr int kWorld = 4, kSteps = 150;
  std::vector<std::string> errors = onOrderedRanks(api, kWorld, [&](int r, comm::FdExchange &, PeerArray &a,
                                                                   PeerStepOrder &order) -> std::string {
    std::mt19937 rng(r);
    std::string wrong;
    for (int step = 1; step <= kSteps && wrong.empty(); ++step) {
      if (Status s = order.beforeWrites(nullptr); !s.ok())
        return s.message();
      for (int p = 0; p < kWorld; ++p) { // the first round (decode CP's queries)
        std::vector<int32_t> mine = sliceOf(-step, r);
        (void)api.upload(a.part(p) + kFirstAt + r * kSliceInts * 4, mine.data(), kSliceInts * 4);
      }
      if (Status s = order.afterFirstWrites(nullptr); !s.ok())
        return s.message();
      if (Status s = order.beforeFirstReads(nullptr); !s.ok())
        return s.message();
      if (rng() % 4 == 0)
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
      for (int q = 0; q < kWorld; ++q) {
        std::vector<int32_t> got(kSliceInts, -1);
        (void)api.download(got.data(), a.part(r) + kFirstAt + q * kSliceInts * 4, kSliceInts * 4);
        if (got != sliceOf(-step, q))
          wrong = fmt::format("step {}: first-round slice of rank {} reads {}", step, q, got[0]);
      }
      for (int p = 0; p < kWorld; ++p) {
        std::vector<int32_t> mine = sliceOf(step, r);
        (void)api.upload(a.part(p) + r * kSliceInts * 4, mine.data(), kSliceInts * 4);
        if (rng() % 4 == 0) // uneven speeds: a rank that lags mid-write
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
      }
      if (Status s = order.afterWrites(nullptr); !s.ok())
        return s.message();
      if (Status s = order.beforeReads(nullptr); !s.ok())
        return s.message();
      if (rng() % 4 == 0) // a rank that lags before reading: fast peers must not write over it
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
      for (int q = 0; q < kWorld; ++q) {
        std::vector<int32_t> got(kSliceInts, -1);
        (void)api.download(got.data(), a.part(r) + q * kSliceInts * 4, kSliceInts * 4);
        if (got != sliceOf(step, q))
          wrong = fmt::format("step {}: slice of rank {} reads {} (step {})", step, q, got[0], got[0] / 16);
      }
      if (Status s = order.afterReads(nullptr); !s.ok())
        return s.message();
    }
    return wrong;
  });
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(PeerStepOrderOnStandIn, AGonePeersWaitsAreReleasedByTheWatchdog) {
  const DeviceApi &api = fakeDriver();
  std::vector<std::string> errors = onOrderedRanks(api, 2, [&](int r, comm::FdExchange &x, PeerArray &,
                                                              PeerStepOrder &order) -> std::string {
    for (int step = 1; step <= 3; ++step) {
      if (r == 1 && step == 2)
        return ""; // rank 1 ends: its exchange closes as its process's end would close it
      // Rank 0's watchdog: the peer's end seen on its socket, its waits released.
      const auto start = std::chrono::steady_clock::now();
      std::thread watchdog;
      if (r == 0 && step == 2)
        watchdog = std::thread([&] {
          while (x.departed().empty() && std::chrono::steady_clock::now() - start < 5s)
            std::this_thread::sleep_for(1ms);
          (void)order.releaseWaitsFor(1);
        });
      Status s = order.beforeWrites(nullptr);
      if (s.ok())
        s = order.afterWrites(nullptr);
      if (s.ok())
        s = order.beforeReads(nullptr);
      if (s.ok())
        s = order.afterReads(nullptr);
      if (watchdog.joinable())
        watchdog.join();
      if (!s.ok())
        return s.message();
      if (r == 0 && step >= 2 && (!order.gone(1) || std::chrono::steady_clock::now() - start > 2s))
        return fmt::format("step {}: the peer's end was not seen within 2 s", step);
    }
    return "";
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(PeerStepOrderOnStandIn, WordsOutsideThePartAndAMissingDriverCallAreNamed) {
  DeviceApi api = fakeDriver();
  std::vector<std::string> errors = onRanks(2, [&](int, comm::FdExchange &x) -> std::string {
    auto a = PeerArray::create(api, 0, x, 4096, 10s);
    if (!a.ok())
      return a.status().message();
    auto outside = PeerStepOrder::create(api, **a, x, (*a)->stride() - 4, 1s);
    DeviceApi noWords = api;
    noWords.waitWordEquals = nullptr;
    auto missing = PeerStepOrder::create(noWords, **a, x, 0, 1s);
    return (outside.ok() ? std::string("outside accepted") : outside.status().message()) + " | " +
           (missing.ok() ? std::string("accepted") : missing.status().message());
  });
  for (const std::string &e : errors) {
    EXPECT_NE(e.find("peer step words' offset"), std::string::npos) << e;
    EXPECT_NE(e.find("has no stream memory operations"), std::string::npos) << e;
  }
}

// The release goes through stream writes on a non-blocking stream of the order's own, never a
// synchronous copy: on a GPU a copy on the legacy default stream queued behind the very wait it was
// to release, and two ranks of four hung (bench/RESULTS.md 2026-12-06 (2)).
TEST(PeerStepOrderOnStandIn, ReleasesAreStreamWritesOnANonBlockingStream) {
  DeviceApi api = fakeDriver();
  std::atomic<int> uploads{0};
  std::atomic<void *> created{nullptr};
  std::vector<void *> writeStreams;
  std::mutex m;
  const DeviceApi base = api;
  api.upload = [&](uint64_t d, const void *s, size_t n) { ++uploads; return base.upload(d, s, n); };
  api.createNonBlockingStream = [&](void **s) {
    int r = base.createNonBlockingStream(s);
    created = *s;
    return r;
  };
  api.writeWord = [&](void *stream, uint64_t word, uint32_t v) {
    std::lock_guard<std::mutex> lock(m);
    writeStreams.push_back(stream);
    return base.writeWord(stream, word, v);
  };
  std::vector<std::string> errors = onOrderedRanks(api, 2, [&](int r, comm::FdExchange &x, PeerArray &,
                                                              PeerStepOrder &order) -> std::string {
    (void)x.barrier(10s); // both created (each uploads its first words) before rank 0 releases
    if (r == 0) {
      const int before = uploads.load();
      {
        std::lock_guard<std::mutex> lock(m);
        writeStreams.clear();
      }
      if (Status s = order.releaseWaitsFor(1); !s.ok())
        return s.message();
      if (uploads.load() != before)
        return "the release copied from the host";
      std::lock_guard<std::mutex> lock(m);
      if (writeStreams.size() != 3)
        return fmt::format("{} words written", writeStreams.size());
      for (void *s : writeStreams)
        if (s == nullptr)
          return "a word written on the default stream";
    }
    (void)x.barrier(10s);
    return "";
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}
