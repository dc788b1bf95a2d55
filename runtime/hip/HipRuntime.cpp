#include "runtime/hip/HipRuntime.h"

#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>

#include "core/EnvTable.h"
#include "runtime/DynamicLibrary.h"

namespace m3idx::hip {

namespace {

// HIP's own declarations (hip_runtime_api.h), reduced to what m3idx calls.
using hipError_t = int;
using hipDevice_t = int;
using hipModule_t = void *;
using hipFunction_t = void *;
using hipStream_t = void *;
using hipDeviceptr_t = void *;
using hipEvent_t = void *;

struct Entry {
  const char *(*getErrorString)(hipError_t) = nullptr;
  hipError_t (*init)(unsigned) = nullptr;
  hipError_t (*deviceGet)(hipDevice_t *, int) = nullptr;
  hipError_t (*deviceGetName)(char *, int, hipDevice_t) = nullptr;
  hipError_t (*setDevice)(int) = nullptr;
  hipError_t (*deviceSynchronize)() = nullptr;
  hipError_t (*moduleLoadData)(hipModule_t *, const void *) = nullptr;
  hipError_t (*moduleGetFunction)(hipFunction_t *, hipModule_t, const char *) = nullptr;
  hipError_t (*moduleLaunchKernel)(hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, hipStream_t, void **, void **) = nullptr;
  hipError_t (*malloc)(void **, size_t) = nullptr;
  hipError_t (*free)(void *) = nullptr;
  hipError_t (*memcpyHtoD)(hipDeviceptr_t, const void *, size_t) = nullptr;
  hipError_t (*memcpyDtoH)(void *, hipDeviceptr_t, size_t) = nullptr;
  hipError_t (*memcpyHtoDAsync)(hipDeviceptr_t, const void *, size_t, hipStream_t) = nullptr;
  hipError_t (*memcpyDtoD)(hipDeviceptr_t, hipDeviceptr_t, size_t) = nullptr;
  hipError_t (*memsetD8Async)(hipDeviceptr_t, unsigned char, size_t, hipStream_t) = nullptr;
  hipError_t (*streamSynchronize)(hipStream_t) = nullptr;
  hipError_t (*streamIsCapturing)(hipStream_t, int *) = nullptr; // hipStreamCaptureStatus
  hipError_t (*eventCreate)(hipEvent_t *) = nullptr;
  hipError_t (*eventDestroy)(hipEvent_t) = nullptr;
  hipError_t (*eventRecord)(hipEvent_t, hipStream_t) = nullptr;
  hipError_t (*eventSynchronize)(hipEvent_t) = nullptr;
  hipError_t (*streamWaitEvent)(hipStream_t, hipEvent_t, unsigned) = nullptr;
  hipError_t (*eventElapsedTime)(float *, hipEvent_t, hipEvent_t) = nullptr;
};

void *asPtr(uint64_t p) { return reinterpret_cast<void *>(static_cast<uintptr_t>(p)); }

StatusOr<runtime::DeviceApi> load(void *h, const std::string &path) {
  using runtime::resolveSymbol;
  Entry e;
  for (Status s : {resolveSymbol(h, path, "hipGetErrorString", e.getErrorString),
                   resolveSymbol(h, path, "hipInit", e.init),
                   resolveSymbol(h, path, "hipDeviceGet", e.deviceGet),
                   resolveSymbol(h, path, "hipDeviceGetName", e.deviceGetName),
                   resolveSymbol(h, path, "hipSetDevice", e.setDevice),
                   resolveSymbol(h, path, "hipDeviceSynchronize", e.deviceSynchronize),
                   resolveSymbol(h, path, "hipModuleLoadData", e.moduleLoadData),
                   resolveSymbol(h, path, "hipModuleGetFunction", e.moduleGetFunction),
                   resolveSymbol(h, path, "hipModuleLaunchKernel", e.moduleLaunchKernel),
                   resolveSymbol(h, path, "hipMalloc", e.malloc),
                   resolveSymbol(h, path, "hipFree", e.free),
                   resolveSymbol(h, path, "hipMemcpyHtoD", e.memcpyHtoD),
                   resolveSymbol(h, path, "hipMemcpyDtoH", e.memcpyDtoH),
                   resolveSymbol(h, path, "hipMemcpyHtoDAsync", e.memcpyHtoDAsync),
                   resolveSymbol(h, path, "hipMemcpyDtoD", e.memcpyDtoD),
                   resolveSymbol(h, path, "hipMemsetD8Async", e.memsetD8Async),
                   resolveSymbol(h, path, "hipStreamSynchronize", e.streamSynchronize),
                   resolveSymbol(h, path, "hipStreamIsCapturing", e.streamIsCapturing),
                   resolveSymbol(h, path, "hipEventCreate", e.eventCreate),
                   resolveSymbol(h, path, "hipEventDestroy", e.eventDestroy),
                   resolveSymbol(h, path, "hipEventRecord", e.eventRecord),
                   resolveSymbol(h, path, "hipEventSynchronize", e.eventSynchronize),
                   resolveSymbol(h, path, "hipStreamWaitEvent", e.streamWaitEvent),
                   resolveSymbol(h, path, "hipEventElapsedTime", e.eventElapsedTime)})
    if (!s.ok())
      return Status::error("hip: " + s.message());
  runtime::DeviceApi a;
  a.platform = "HIP";
  a.library = path;
  a.errorString = [e](int code) { return e.getErrorString(code); };
  a.openDevice = [e](int device, std::string *name) {
    hipDevice_t dev;
    char buf[256] = {};
    hipError_t r = e.deviceGet(&dev, device);
    if (r == 0)
      r = e.deviceGetName(buf, sizeof buf, dev);
    if (r == 0)
      r = e.setDevice(device);
    *name = buf;
    return r;
  };
  a.alloc = [e](uint64_t *p, size_t n) {
    void *d = nullptr;
    hipError_t r = e.malloc(&d, n);
    *p = reinterpret_cast<uintptr_t>(d);
    return r;
  };
  a.free = [e](uint64_t p) { return e.free(asPtr(p)); };
  a.upload = [e](uint64_t d, const void *s, size_t n) { return e.memcpyHtoD(asPtr(d), s, n); };
  a.download = [e](void *d, uint64_t s, size_t n) { return e.memcpyDtoH(d, asPtr(s), n); };
  a.uploadAsync = [e](uint64_t d, const void *s, size_t n, void *stream) {
    return e.memcpyHtoDAsync(asPtr(d), s, n, stream);
  };
  a.copy = [e](uint64_t d, uint64_t s, size_t n) { return e.memcpyDtoD(asPtr(d), asPtr(s), n); };
  a.synchronize = [e] { return e.deviceSynchronize(); };
  a.streamSynchronize = [e](void *stream) { return e.streamSynchronize(stream); };
  a.streamIsCapturing = [e](void *stream, bool *capturing) {
    int status = 0; // hipStreamCaptureStatusNone
    hipError_t r = e.streamIsCapturing(stream, &status);
    *capturing = status != 0;
    return r;
  };
  a.eventCreate = [e](void **ev) { return e.eventCreate(ev); };
  a.eventDestroy = [e](void *ev) { return e.eventDestroy(ev); };
  a.eventRecord = [e](void *ev, void *stream) { return e.eventRecord(ev, stream); };
  a.eventSynchronize = [e](void *ev) { return e.eventSynchronize(ev); };
  a.streamWaitEvent = [e](void *stream, void *ev) { return e.streamWaitEvent(stream, ev, 0); };
  a.eventElapsedMs = [e](float *ms, void *start, void *stop) {
    return e.eventElapsedTime(ms, start, stop);
  };
  a.memsetAsync = [e](uint64_t d, uint8_t v, size_t n, void *stream) {
    return e.memsetD8Async(asPtr(d), v, n, stream);
  };
  a.loadModule = [e](void **m, const void *image) { return e.moduleLoadData(m, image); };
  a.getFunction = [e](void **f, void *m, const char *name) { return e.moduleGetFunction(f, m, name); };
  a.launch = [e](void *f, unsigned programs, unsigned threads, void *stream, void **params, bool) {
    return e.moduleLaunchKernel(f, programs, 1, 1, threads, 1, 1, 0, stream, params, nullptr);
  };
  if (Status s = a.check(e.init(0), "hipInit"); !s.ok())
    return s;
  return a;
}

} // namespace

const std::vector<std::string> &hipLibraryNames() {
  static const std::vector<std::string> names = {"libamdhip64.so", "libamdhip64.so.7",
                                                 "libamdhip64.so.6", "libamdhip64.so.5"};
  return names;
}

StatusOr<const runtime::DeviceApi *> loadHipRuntime() {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<runtime::DeviceApi>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string configured = env::get("M3IDX_HIP_LIBRARY");
  const std::vector<std::string> candidates =
      configured.empty() ? hipLibraryNames() : std::vector<std::string>{configured};
  std::string tried, lastError;
  for (const std::string &path : candidates) {
    if (auto it = loaded.find(path); it != loaded.end())
      return it->second.get();
    void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      tried += (tried.empty() ? "" : ", ") + path;
      lastError = dlerror();
      continue;
    }
    StatusOr<runtime::DeviceApi> api = load(h, path);
    if (!api.ok()) {
      dlclose(h);
      return api.status();
    }
    auto &slot = loaded[path];
    slot = std::make_unique<runtime::DeviceApi>(std::move(api).value());
    return slot.get();
  }
  return Status::error(fmt::format("hip: cannot load the HIP runtime library (tried {}): {}", tried,
                                   lastError));
}

} // namespace m3idx::hip
