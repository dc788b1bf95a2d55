#include "runtime/cuda/CudaDriver.h"

#include <dlfcn.h>
#include <memory>
#include <mutex>

#include "core/EnvTable.h"
#include "runtime/DynamicLibrary.h"

namespace m3idx::cuda {

Status DriverApi::check(CUresult r, const char *call) const {
  if (r == 0)
    return Status();
  const char *text = nullptr;
  if (getErrorString)
    getErrorString(r, &text);
  return Status::error(fmt::format("CUDA {} failed: {} (code {})", call, text ? text : "unknown error", r));
}

using runtime::resolveSymbol;

StatusOr<const DriverApi *> loadDriver() {
  static std::mutex mutex;
  static std::unique_ptr<DriverApi> api;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mutex);
  if (api)
    return api.get();
  if (!failure.empty())
    return Status::error(failure);
  std::string path = env::get("M3IDX_CUDA_LIBRARY");
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    failure = fmt::format("cuda: cannot load the driver library {}: {}", path, dlerror());
    return Status::error(failure);
  }
  auto a = std::make_unique<DriverApi>();
  a->path = path;
  for (Status s : {resolveSymbol(h, path, "cuGetErrorString", a->getErrorString),
                   resolveSymbol(h, path, "cuInit", a->init),
                   resolveSymbol(h, path, "cuDeviceGet", a->deviceGet),
                   resolveSymbol(h, path, "cuDeviceGetName", a->deviceGetName),
                   resolveSymbol(h, path, "cuDevicePrimaryCtxRetain", a->primaryCtxRetain),
                   resolveSymbol(h, path, "cuCtxSetCurrent", a->ctxSetCurrent),
                   resolveSymbol(h, path, "cuCtxSynchronize", a->ctxSynchronize),
                   resolveSymbol(h, path, "cuModuleLoadData", a->moduleLoadData),
                   resolveSymbol(h, path, "cuModuleGetFunction", a->moduleGetFunction),
                   resolveSymbol(h, path, "cuLaunchKernel", a->launchKernel),
                   resolveSymbol(h, path, "cuMemAlloc_v2", a->memAlloc),
                   resolveSymbol(h, path, "cuMemFree_v2", a->memFree),
                   resolveSymbol(h, path, "cuMemcpyHtoD_v2", a->memcpyHtoD),
                   resolveSymbol(h, path, "cuMemcpyDtoH_v2", a->memcpyDtoH),
                   resolveSymbol(h, path, "cuMemcpyDtoD_v2", a->memcpyDtoD)})
    if (!s.ok()) {
      failure = s.message();
      dlclose(h);
      return s;
    }
  if (Status s = a->check(a->init(0), "cuInit"); !s.ok()) {
    failure = s.message();
    return s;
  }
  api = std::move(a);
  return api.get();
}

} // namespace m3idx::cuda
