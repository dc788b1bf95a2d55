// What GPU benchmarks need around a backend's steps and nothing in production does (METHOD.md):
// an L2 flush before each timed step, the device's copy bandwidth measured in the same process,
// and per-kernel medians of many timed steps.
#pragma once

#include <map>
#include <string>

#include "core/Batch.h"
#include "runtime/gpu/DeviceApi.h"
#include "runtime/gpu/DeviceScratch.h"
#include "runtime/gpu/GpuBackend.h"

namespace m3idx::bench {

// Overwrites a buffer larger than any cache in front of HBM (H200: 50 MB L2; MI355X: 256 MB
// Infinity Cache) on a stream, so a step queued after it reads its inputs from HBM. Each flush
// writes another byte value, so no cache can keep a line of it clean.
class L2Flush {
public:
  // 512 MiB by default; more makes the flush outlast a host call queued right after it.
  explicit L2Flush(const runtime::DeviceApi &api, size_t bytes = size_t{512} << 20)
      : api_(api), buffer_(&api), bytes_(bytes) {}
  Status operator()(void *stream);
  // As RunOptions::beforeLaunches: the flush between a timed step's uploads and its first event.
  std::function<Status(void *)> hook() {
    return [this](void *stream) { return (*this)(stream); };
  }

private:
  const runtime::DeviceApi &api_;
  runtime::DeviceScratch buffer_;
  size_t bytes_;
  uint8_t value_ = 0;
};

// A start and a stop event for timing on a stream, destroyed with this object.
class EventPair {
public:
  explicit EventPair(const runtime::DeviceApi &api) : api_(api) {}
  ~EventPair();
  EventPair(const EventPair &) = delete;
  EventPair &operator=(const EventPair &) = delete;
  Status create();
  void *start = nullptr, *stop = nullptr;

private:
  const runtime::DeviceApi &api_;
};

// Device-to-device copy bandwidth in GB/s (bytes read + written), the median of `repeat` copies
// timed by events on the default stream after one untimed copy.
StatusOr<double> copyBandwidthGBs(const runtime::DeviceApi &api, size_t bytes, int repeat);

// Per kernel, the median of `runs` steps of `batch` timed by the backend's events, each after an L2
// flush, following one untimed step (which loads the kernels).
StatusOr<std::map<std::string, double>> medianKernelMs(runtime::GpuBackend &backend, const BatchView &batch,
                                                        runtime::RunOptions options, int runs);

} // namespace m3idx::bench
