// Runs a range of kernel programs on all host cores: chunks are taken from a shared counter, so
// uneven programs (blocks past a request's end return at once) still balance.
#pragma once

#include <cstdint>
#include <functional>

namespace m3idx::runtime {

// Number of threads host launches use: M3IDX_NUM_THREADS, else the hardware's.
int hostThreads();

void parallelFor(int64_t count, int64_t chunk, const std::function<void(int64_t, int64_t)> &fn);

} // namespace m3idx::runtime
