// The CUDA backend (`--backend cuda`): the GPU backend over the CUDA driver with sm_90 PTX (the
// driver JIT-compiles it), one CTA of 32 threads per program. Builds without LLVM or a CUDA SDK.
#pragma once

#include <memory>

#include "runtime/gpu/GpuBackend.h"

namespace m3idx::cuda {

// On a device that is not sm_90 (the PTX targets sm_90a) an error names the device and both.
StatusOr<std::unique_ptr<runtime::GpuBackend>> createCudaBackend(int device, runtime::CodeSource ptx);

} // namespace m3idx::cuda
