// m3idx run/bench --indexer: steps through the Indexer API on a GPU's buffers (tools/GpuSteps.h).
#include <algorithm>
#include <chrono>
#include <iostream>

#include "bench/support/DeviceCase.h"
#include "bench/support/DeviceTiming.h"
#include "m3idx/Indexer.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/hip/HipRuntime.h"
#include "tools/GpuSteps.h"

namespace m3idx::cli {

namespace {

struct DeviceIndexer {
  const runtime::DeviceApi *api = nullptr;
  Device device;
  std::unique_ptr<Indexer> indexer;
};

// An Indexer for `batch`'s parameters on device 0 of `backend`, warmed up (every kernel loaded).
StatusOr<DeviceIndexer> deviceIndexer(const std::string &backend, const BatchView &batch) {
  DeviceIndexer d;
  d.device = Device{backend == "hip" ? DeviceKind::Hip : DeviceKind::Cuda, 0};
  StatusOr<const runtime::DeviceApi *> api = backend == "hip" ? hip::loadHipRuntime() : cuda::loadDriver();
  if (!api.ok())
    return api.status();
  d.api = *api;
  IndexerConfig config;
  config.numIndexHeads = batch.params.numHeads;
  config.initBlocks = batch.params.initBlocks;
  config.localBlocks = batch.params.localBlocks;
  config.decodeQueryLens = {batch.params.decodeQueryLen};
  StatusOr<std::unique_ptr<Indexer>> indexer = Indexer::create(config, d.device);
  if (!indexer.ok())
    return indexer.status();
  d.indexer = std::move(indexer).value();
  M3IDX_RETURN_IF_ERROR(d.indexer->warmup());
  return d;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

StatusOr<std::vector<int32_t>> runThroughIndexer(const std::string &backend, const BatchView &batch,
                                                 bool deviceTables) {
  StatusOr<DeviceIndexer> d = deviceIndexer(backend, batch);
  if (!d.ok())
    return d.status();
  auto onDevice = bench::DeviceCase::upload(*d->api, d->device, batch, deviceTables);
  if (!onDevice.ok())
    return onDevice.status();
  StatusOr<ForwardResult> r = (*onDevice)->forward(*d->indexer, nullptr, /*callerTopk=*/true);
  if (!r.ok())
    return r.status();
  return (*onDevice)->download(*r);
}

// Events around forward() on the null stream after a 2 GiB memset: the memset (about 0.6 ms on the
// H200) outlasts forward()'s host time, so the GPU reaches the start event with the step queued
// whole and the events time the GPU's work, not the host's.
Status benchIndexer(runtime::GpuBackend &gpu, const std::string &backend, const BatchView &batch, int repeat) {
  constexpr size_t kFlushBytes = size_t{2} << 30;
  constexpr int kWarmup = 2;
  StatusOr<std::map<std::string, double>> launches = bench::medianKernelMs(gpu, batch, runtime::RunOptions{}, repeat);
  if (!launches.ok())
    return launches.status();
  double kernels = 0;
  for (auto &[name, t] : *launches)
    kernels += t;
  std::string line = fmt::format("Indexer::forward H={} requests={} rows={}: backend launches alone {:.3f} ms;",
                                 batch.params.numHeads, batch.numRequests, batch.numRows, kernels);
  for (bool deviceTables : {false, true}) {
    StatusOr<DeviceIndexer> d = deviceIndexer(backend, batch);
    if (!d.ok())
      return d.status();
    const runtime::DeviceApi &api = *d->api;
    bench::L2Flush flush(api, kFlushBytes);
    bench::EventPair events(api);
    M3IDX_RETURN_IF_ERROR(events.create());
    auto onDevice = bench::DeviceCase::upload(api, d->device, batch, deviceTables);
    if (!onDevice.ok())
      return onDevice.status();
    std::vector<double> gpuMs, hostUs;
    Status failed;
    for (int i = 0; i < kWarmup + repeat && failed.ok(); ++i) {
      M3IDX_RETURN_IF_ERROR(flush(nullptr));
      api.eventRecord(events.start, nullptr);
      const auto t0 = std::chrono::steady_clock::now();
      StatusOr<ForwardResult> r = (*onDevice)->forward(*d->indexer, nullptr, false);
      const auto t1 = std::chrono::steady_clock::now();
      api.eventRecord(events.stop, nullptr);
      failed = api.check(api.eventSynchronize(events.stop), "event synchronize");
      if (!r.ok())
        failed = r.status();
      float ms = 0;
      if (failed.ok())
        failed = api.check(api.eventElapsedMs(&ms, events.start, events.stop), "event elapsed time");
      if (i >= kWarmup) {
        gpuMs.push_back(ms);
        hostUs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    }
    M3IDX_RETURN_IF_ERROR(failed);
    line += fmt::format(" {} table: {:.3f} ms on the stream ({:+.1f}%), forward() returns after {:.0f} us;",
                        deviceTables ? "device" : "host", median(gpuMs), 100.0 * (median(gpuMs) / kernels - 1),
                        median(hostUs));
  }
  std::cout << line
            << fmt::format(" block table {:.0f} KiB (events, medians of {})\n",
                           double(batch.numRequests) * batch.maxBlocks * 4 / 1024, repeat);
  return Status();
}

} // namespace m3idx::cli
