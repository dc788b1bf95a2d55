#include "runtime/hip/HipBackend.h"

#include "runtime/hip/HipRuntime.h"
#include "tuning/TargetRegistry.h"

namespace m3idx::hip {

StatusOr<std::unique_ptr<runtime::GpuBackend>> createHipBackend(int device, runtime::CodeSource hsaco) {
  auto api = loadHipRuntime();
  if (!api.ok())
    return api.status();
  const tuning::TargetInfo &gfx950 = **tuning::targetNamed("gfx950");
  return runtime::GpuBackend::create(*api, "hip", device, gfx950.programThreads, std::move(hsaco), gfx950.tuning(),
                                     std::string(gfx950.deviceArch));
}

} // namespace m3idx::hip
