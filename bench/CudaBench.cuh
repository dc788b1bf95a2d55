// What the standalone nvcc benchmarks under bench/ share: checking CUDA runtime calls, and timing a
// launch sequence by CUDA events (median of many runs, optionally after an L2-evicting memset).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));            \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

struct EventTimer {
  cudaEvent_t start, stop;
  uint8_t *flush = nullptr; // when set, a memset of flushBytes evicts L2 before every run
  size_t flushBytes = 0;
  EventTimer() {
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
  }
  // Milliseconds from an event before f() to one after it, median of `runs` after `warmups`.
  template <typename F> double medianMs(F &&f, int warmups = 1, int runs = 20) {
    std::vector<float> ms;
    for (int i = 0; i < warmups + runs; ++i) {
      if (flush)
        CHECK(cudaMemsetAsync(flush, i, flushBytes));
      CHECK(cudaEventRecord(start));
      f();
      CHECK(cudaEventRecord(stop));
      CHECK(cudaEventSynchronize(stop));
      float t = 0;
      CHECK(cudaEventElapsedTime(&t, start, stop));
      if (i >= warmups)
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};
