#include "runtime/cuda/CudaBackend.h"

#include "runtime/cuda/CudaDriver.h"
#include "tuning/TargetRegistry.h"

namespace m3idx::cuda {

StatusOr<std::unique_ptr<runtime::GpuBackend>> createCudaBackend(int device, runtime::CodeSource ptx) {
  auto api = loadDriver();
  if (!api.ok())
    return api.status();
  const tuning::TargetInfo &sm90 = **tuning::targetNamed("sm_90");
  return runtime::GpuBackend::create(*api, "cuda", device, sm90.programThreads, std::move(ptx), sm90.tuning(),
                                     std::string(sm90.deviceArch));
}

} // namespace m3idx::cuda
