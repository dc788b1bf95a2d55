#include "bench/support/DeviceTiming.h"

#include <algorithm>
#include <vector>

namespace m3idx::bench {

EventPair::~EventPair() {
  for (void *e : {start, stop})
    if (e)
      api_.eventDestroy(e);
}

Status EventPair::create() {
  M3IDX_RETURN_IF_ERROR(api_.check(api_.eventCreate(&start), "event creation"));
  return api_.check(api_.eventCreate(&stop), "event creation");
}

Status L2Flush::operator()(void *stream) {
  StatusOr<uint64_t> buffer = buffer_.ensure(bytes_);
  if (!buffer.ok())
    return buffer.status();
  return api_.check(api_.memsetAsync(*buffer, ++value_, bytes_, stream), "L2 flush (memset)");
}

StatusOr<double> copyBandwidthGBs(const runtime::DeviceApi &api, size_t bytes, int repeat) {
  runtime::DeviceScratch src(&api), dst(&api);
  StatusOr<uint64_t> from = src.ensure(bytes), to = dst.ensure(bytes);
  if (!from.ok() || !to.ok())
    return from.ok() ? to.status() : from.status();
  EventPair events(api);
  M3IDX_RETURN_IF_ERROR(events.create());
  std::vector<double> ms;
  for (int i = 0; i <= std::max(repeat, 1); ++i) {
    M3IDX_RETURN_IF_ERROR(api.check(api.eventRecord(events.start, nullptr), "event record"));
    M3IDX_RETURN_IF_ERROR(api.check(api.copy(*to, *from, bytes), "device copy"));
    M3IDX_RETURN_IF_ERROR(api.check(api.eventRecord(events.stop, nullptr), "event record"));
    M3IDX_RETURN_IF_ERROR(api.check(api.eventSynchronize(events.stop), "event synchronize"));
    float t = 0;
    M3IDX_RETURN_IF_ERROR(api.check(api.eventElapsedMs(&t, events.start, events.stop), "event elapsed time"));
    if (i) // the first copy is a warm-up
      ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e6);
}

StatusOr<std::map<std::string, double>> medianKernelMs(runtime::GpuBackend &backend, const BatchView &batch,
                                                        runtime::RunOptions options, int runs) {
  L2Flush flush(backend.api());
  options.beforeLaunches = flush.hook();
  std::map<std::string, std::vector<double>> perKernel;
  for (int i = 0; i <= runs; ++i) {
    auto got = backend.run(batch, options);
    if (!got.ok())
      return got.status();
    if (i > 0)
      for (auto &[name, t] : backend.lastKernelBreakdown())
        perKernel[name].push_back(t);
  }
  std::map<std::string, double> out;
  for (auto &[name, t] : perKernel) {
    std::sort(t.begin(), t.end());
    out[name] = t[t.size() / 2];
  }
  return out;
}

} // namespace m3idx::bench
