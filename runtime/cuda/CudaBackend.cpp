#include "runtime/cuda/CudaBackend.h"

#include "runtime/cuda/CudaDriver.h"

namespace m3idx::cuda {

StatusOr<std::unique_ptr<runtime::GpuBackend>> createCudaBackend(int device, runtime::CodeSource ptx) {
  auto api = loadDriver();
  if (!api.ok())
    return api.status();
  return runtime::GpuBackend::create(*api, "cuda", device, 32, std::move(ptx),
                                     **tuning::tuningFor("sm_90"), "sm_90");
}

} // namespace m3idx::cuda
