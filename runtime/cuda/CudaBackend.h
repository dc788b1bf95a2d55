// The CUDA backend (`--backend cuda`): the GPU backend over the CUDA driver with sm_90 PTX (the
// driver JIT-compiles it), one CTA of 32 threads per program. Builds without LLVM or a CUDA SDK.
#pragma once

#include <memory>
#include <string>

#include "runtime/gpu/GpuBackend.h"

namespace m3idx::cuda {

// PTX files named "<kernel>.<config>.ptx" in `dir` (what bench/gpu-prepare.sh writes); a
// "<kernel>.<config>.cubin" beside one (ptxas's output) is taken instead.
runtime::CodeSource ptxFromDirectory(const std::string &dir);
std::string ptxFileName(kernels::KernelKind kind, const kernels::KernelConfig &config);

StatusOr<std::unique_ptr<runtime::GpuBackend>> createCudaBackend(int device, runtime::CodeSource ptx);

} // namespace m3idx::cuda
