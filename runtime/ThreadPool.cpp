#include "runtime/ThreadPool.h"

#include "core/EnvTable.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace m3idx::runtime {

int hostThreads() {
  int n = std::atoi(env::get("M3IDX_NUM_THREADS").c_str());
  if (n > 0)
    return n;
  return std::max(1u, std::thread::hardware_concurrency());
}

void parallelFor(int64_t count, int64_t chunk, const std::function<void(int64_t, int64_t)> &fn) {
  if (count <= 0)
    return;
  chunk = std::max<int64_t>(1, chunk);
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (;;) {
      int64_t begin = next.fetch_add(chunk);
      if (begin >= count)
        return;
      fn(begin, std::min(count, begin + chunk));
    }
  };
  const int64_t threads = std::min<int64_t>(hostThreads(), (count + chunk - 1) / chunk);
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < threads; ++i)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
}

} // namespace m3idx::runtime
