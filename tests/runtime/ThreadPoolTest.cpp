// parallelFor: every index in [0, count) runs exactly once for any count and chunk, on at most
// M3IDX_NUM_THREADS threads; hostThreads reads that variable and falls back to the hardware's.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/ThreadPool.h"

using namespace m3idx;

TEST(ThreadPool, EveryIndexRunsExactlyOnce) {
  for (int64_t count : {0, 1, 7, 1000})
    for (int64_t chunk : {0, 1, 3, 64, 5000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
      runtime::parallelFor(count, chunk, [&](int64_t begin, int64_t end) {
        ASSERT_LE(0, begin);
        ASSERT_LE(begin, end);
        ASSERT_LE(end, count);
        for (int64_t i = begin; i < end; ++i)
          ++hits[static_cast<size_t>(i)];
      });
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "count " << count << " chunk " << chunk << " index " << i;
    }
}

TEST(ThreadPool, UsesAtMostTheConfiguredThreads) {
  ::setenv("M3IDX_NUM_THREADS", "3", 1);
  EXPECT_EQ(runtime::hostThreads(), 3);
  std::mutex mutex;
  std::set<std::thread::id> seen;
  runtime::parallelFor(300, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::lock_guard<std::mutex> lock(mutex);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_LE(seen.size(), 3u);
  EXPECT_TRUE(seen.count(std::this_thread::get_id())) << "the caller works too";
  ::setenv("M3IDX_NUM_THREADS", "none", 1); // not a number: the hardware's count
  EXPECT_EQ(runtime::hostThreads(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  ::unsetenv("M3IDX_NUM_THREADS");
}
