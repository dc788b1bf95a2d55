// The CUDA driver as a DeviceApi: the few entry points m3idx uses, declared in CudaDriver.cpp and
// resolved from libcuda.so.1 (or M3IDX_CUDA_LIBRARY) with dlopen, so no CUDA SDK is needed to build.
#pragma once

#include "core/Status.h"
#include "runtime/gpu/DeviceApi.h"

namespace m3idx::cuda {

// Loads the driver (once per library path) and calls cuInit. A library that cannot be loaded, or
// lacks a symbol, is an error naming it; failures are retried on the next call.
StatusOr<const runtime::DeviceApi *> loadDriver();

} // namespace m3idx::cuda
