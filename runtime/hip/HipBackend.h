// The HIP backend (`--backend hip`): the GPU backend over the HIP runtime with gfx950 code objects
// (hipModuleLoadData), one wave64 workgroup per program. Builds without LLVM or ROCm; no AMD GPU
// was available to this project, so it has only been exercised up to loading the runtime.
#pragma once

#include <memory>

#include "runtime/gpu/GpuBackend.h"

namespace m3idx::hip {

StatusOr<std::unique_ptr<runtime::GpuBackend>> createHipBackend(int device, runtime::CodeSource hsaco);

} // namespace m3idx::hip
