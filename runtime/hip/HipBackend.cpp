#include "runtime/hip/HipBackend.h"

#include "runtime/hip/HipRuntime.h"

namespace m3idx::hip {

StatusOr<std::unique_ptr<runtime::GpuBackend>> createHipBackend(int device, runtime::CodeSource hsaco) {
  auto api = loadHipRuntime();
  if (!api.ok())
    return api.status();
  return runtime::GpuBackend::create(*api, "hip", device, 64, std::move(hsaco), **tuning::tuningFor("gfx950"));
}

} // namespace m3idx::hip
