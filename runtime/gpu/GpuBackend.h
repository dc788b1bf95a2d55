// A GPU backend over a DeviceApi (the CUDA driver or the HIP runtime): the DSL kernels' code
// objects (sm_90 PTX, gfx950 HSACO) loaded with the platform's module loader and launched one
// program per block of the target's warp / wavefront, on the caller's stream. It needs no LLVM:
// code comes from a CodeSource (the in-process compiler, or files made elsewhere).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels_src/KernelCatalog.h"
#include "runtime/Backend.h"
#include "runtime/gpu/DeviceApi.h"

namespace m3idx::runtime {

using CodeSource =
    std::function<StatusOr<std::string>(kernels::KernelKind, const kernels::KernelConfig &)>;

class GpuBackend final : public Backend {
public:
  // `threads` per program: 32 for sm_90, 64 for gfx950 (lowering::GpuForm).
  static StatusOr<std::unique_ptr<GpuBackend>> create(const DeviceApi *api, std::string name,
                                                      int device, unsigned threads,
                                                      CodeSource source);
  ~GpuBackend() override;
  std::string name() const override { return name_; }
  std::string deviceName() const { return deviceName_; }
  StatusOr<IndexerOutput> run(const BatchView &batch, const RunOptions &options) override;
  // Milliseconds of the last run()'s launches, first to last, from events recorded on its stream.
  double lastKernelMs() const { return lastKernelMs_; }
  // Milliseconds of each kernel of the last run (events between consecutive launches), by name.
  const std::map<std::string, double> &lastKernelBreakdown() const { return kernelMs_; }
  // Device-to-device copy bandwidth in GB/s (bytes read + written), median of `repeat` copies
  // timed by events, after one untimed copy.
  StatusOr<double> copyBandwidthGBs(size_t bytes, int repeat);

private:
  GpuBackend(const DeviceApi *api, std::string name, std::string deviceName, unsigned threads,
             CodeSource source)
      : api_(api), name_(std::move(name)), deviceName_(std::move(deviceName)), threads_(threads),
        source_(std::move(source)) {}
  StatusOr<void *> function(kernels::KernelKind kind, const kernels::KernelConfig &config);
  StatusOr<void *> event(size_t i); // the i-th timing event, created on first use
  Status flushL2(void *stream);

  const DeviceApi *api_;
  std::string name_, deviceName_;
  unsigned threads_;
  CodeSource source_;
  std::map<std::pair<int, std::string>, void *> functions_;
  std::vector<void *> events_;
  uint64_t flushBuffer_ = 0; // allocated on the first flushL2 run
  int flushes_ = 0;
  double lastKernelMs_ = 0;
  std::map<std::string, double> kernelMs_;
};

} // namespace m3idx::runtime
