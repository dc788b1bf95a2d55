// The CUDA backend (`--backend cuda`): the DSL kernels' sm_90 PTX, loaded with the driver
// (cuModuleLoadData JIT-compiles it) and launched one CTA of 32 threads per program. It needs no
// LLVM: kernels come from a PtxSource (the in-process compiler, or PTX files made elsewhere), so
// it also builds where only the CUDA driver exists.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "kernels_src/KernelCatalog.h"
#include "runtime/Backend.h"
#include "runtime/cuda/CudaDriver.h"

namespace m3idx::cuda {

using PtxSource = std::function<StatusOr<std::string>(kernels::KernelKind, const kernels::KernelConfig &)>;

// PTX files named "<kernel>.<config>.ptx" in `dir` (what tools/m3idx-ptx-dump writes).
PtxSource ptxFromDirectory(const std::string &dir);
std::string ptxFileName(kernels::KernelKind kind, const kernels::KernelConfig &config);

class CudaBackend final : public runtime::Backend {
public:
  static StatusOr<std::unique_ptr<CudaBackend>> create(int device, PtxSource source);
  std::string name() const override { return "cuda"; }
  std::string deviceName() const { return deviceName_; }
  StatusOr<IndexerOutput> run(const BatchView &batch, const runtime::RunOptions &options) override;
  // Milliseconds of the last run()'s kernel launches (host clock around synchronized launches).
  double lastKernelMs() const { return lastKernelMs_; }
  // Device-to-device copy bandwidth in GB/s (bytes read + written), median of `repeat` copies.
  StatusOr<double> copyBandwidthGBs(size_t bytes, int repeat);

private:
  CudaBackend(const DriverApi *api, std::string deviceName, PtxSource source)
      : api_(api), deviceName_(std::move(deviceName)), source_(std::move(source)) {}
  StatusOr<CUfunction> function(kernels::KernelKind kind, const kernels::KernelConfig &config);

  const DriverApi *api_;
  std::string deviceName_;
  PtxSource source_;
  std::map<std::pair<int, std::string>, CUfunction> functions_;
  double lastKernelMs_ = 0;
};

} // namespace m3idx::cuda
