// The benchmark support over a recording DeviceApi (every machine): the L2 flush overwrites one
// buffer larger than L2 with a new byte each time, on the step's stream; the copy bandwidth is the
// median of the timed copies, the warm-up copy left out; a failed allocation is an error naming it.
#include <vector>

#include <gtest/gtest.h>

#include "bench/support/DeviceTiming.h"

using namespace m3idx;

namespace {

struct Memset {
  uint64_t dst;
  uint8_t value;
  size_t bytes;
  void *stream;
};

// Records memsets and copies; events report the next of `elapsed` in turn.
struct RecordingApi {
  runtime::DeviceApi api;
  std::vector<Memset> memsets;
  int allocations = 0, copies = 0, frees = 0;
  std::vector<float> elapsed;
  size_t nextElapsed = 0;
  bool failAlloc = false;

  RecordingApi() {
    api.platform = "FAKE";
    api.errorString = [](int) { return "out of memory"; };
    api.alloc = [this](uint64_t *p, size_t) {
      if (failAlloc)
        return 2;
      *p = 0x1000 * ++allocations;
      return 0;
    };
    api.free = [this](uint64_t) { ++frees; return 0; };
    api.synchronize = [] { return 0; };
    api.memsetAsync = [this](uint64_t d, uint8_t v, size_t n, void *s) {
      memsets.push_back({d, v, n, s});
      return 0;
    };
    api.copy = [this](uint64_t, uint64_t, size_t) { ++copies; return 0; };
    api.eventCreate = [](void **e) { *e = reinterpret_cast<void *>(1); return 0; };
    api.eventDestroy = [](void *) { return 0; };
    api.eventRecord = [](void *, void *) { return 0; };
    api.eventSynchronize = [](void *) { return 0; };
    api.eventElapsedMs = [this](float *ms, void *, void *) {
      *ms = elapsed.at(nextElapsed++);
      return 0;
    };
  }
};

TEST(L2Flush, OverwritesOneBufferLargerThanL2WithANewByteOnTheStream) {
  RecordingApi r;
  {
    bench::L2Flush flush(r.api);
    void *stream = reinterpret_cast<void *>(7);
    ASSERT_TRUE(flush(stream).ok());
    ASSERT_TRUE(flush.hook()(stream).ok());
    ASSERT_EQ(r.memsets.size(), 2u);
    EXPECT_EQ(r.allocations, 1);
    EXPECT_EQ(r.memsets[0].dst, r.memsets[1].dst);
    EXPECT_NE(r.memsets[0].value, r.memsets[1].value);
    for (const Memset &m : r.memsets) {
      EXPECT_GE(m.bytes, size_t{256} << 20); // more than the H200's 50 MB L2 and MI355X's 256 MB
      EXPECT_EQ(m.stream, stream);
    }
  }
  EXPECT_EQ(r.frees, 1);
  bench::L2Flush longer(r.api, size_t{2} << 30); // Indexer::forward's: outlasts forward()'s host time
  ASSERT_TRUE(longer(nullptr).ok());
  EXPECT_EQ(r.memsets.back().bytes, size_t{2} << 30);
}

TEST(CopyBandwidth, IsTheMedianOfTheTimedCopiesAfterAWarmUp) {
  RecordingApi r;
  r.elapsed = {100.0f, 4.0f, 1.0f, 2.0f}; // the warm-up's 100 ms must not count
  const size_t bytes = size_t{1} << 30;
  StatusOr<double> gbs = bench::copyBandwidthGBs(r.api, bytes, 3);
  ASSERT_TRUE(gbs.ok()) << gbs.status().message();
  EXPECT_DOUBLE_EQ(*gbs, 2.0 * bytes / (2.0 * 1e6)); // read + written, at the median 2 ms
  EXPECT_EQ(r.copies, 4);
  EXPECT_EQ(r.frees, 2);
}

TEST(CopyBandwidth, AFailedAllocationIsAnErrorNamingIt) {
  RecordingApi r;
  r.failAlloc = true;
  StatusOr<double> gbs = bench::copyBandwidthGBs(r.api, 1 << 20, 3);
  ASSERT_FALSE(gbs.ok());
  EXPECT_NE(gbs.status().message().find("memory allocation failed: out of memory"), std::string::npos)
      << gbs.status().message();
}

} // namespace
