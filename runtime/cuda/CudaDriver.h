// The few CUDA driver entry points m3idx uses, declared here and resolved from libcuda.so.1 with
// dlopen at run time (no CUDA SDK at build time). Every call is checked; errors name the call and
// carry the driver's error string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/Status.h"

namespace m3idx::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUevent = void *;

struct DriverApi {
  std::string path;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*deviceGet)(CUdevice *, int) = nullptr;
  CUresult (*deviceGetName)(char *, int, CUdevice) = nullptr;
  CUresult (*primaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
  CUresult (*ctxSetCurrent)(CUcontext) = nullptr;
  CUresult (*ctxSynchronize)() = nullptr;
  CUresult (*moduleLoadData)(CUmodule *, const void *) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr;
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **, void **) = nullptr;
  CUresult (*memAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*memFree)(CUdeviceptr) = nullptr;
  CUresult (*memcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
  CUresult (*memcpyDtoH)(void *, CUdeviceptr, size_t) = nullptr;
  CUresult (*memcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t) = nullptr;
  CUresult (*getErrorString)(CUresult, const char **) = nullptr;

  // "CALL failed: ERROR (code N)" or ok.
  Status check(CUresult r, const char *call) const;
};

// Loads the driver once (M3IDX_CUDA_LIBRARY, else libcuda.so.1) and calls cuInit.
StatusOr<const DriverApi *> loadDriver();

} // namespace m3idx::cuda
