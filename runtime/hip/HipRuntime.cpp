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
using hipMemGenericAllocationHandle_t = void *;

// Virtual memory management (hip_runtime_api.h's hipMemLocation, hipMemAllocationProp,
// hipMemAccessDesc: the layout of CUDA's, checked against ROCm's header).
struct MemLocation {
  int type; // hipMemLocationTypeDevice = 1
  int id;
};
struct MemAllocationProp {
  int type;                // hipMemAllocationTypePinned = 1
  int requestedHandleType; // hipMemHandleTypePosixFileDescriptor = 1
  MemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType, gpuDirectRDMACapable;
    unsigned short usage;
  } allocFlags;
};
static_assert(sizeof(MemAllocationProp) == 32, "hip_runtime_api.h's hipMemAllocationProp");
struct MemAccessDesc {
  MemLocation location;
  int flags; // hipMemAccessFlagsProtReadWrite = 3
};
constexpr int kPosixFileDescriptor = 1, kGranularityRecommended = 1, kWaitValueEq = 1, kDeviceToDevice = 3,
              kNonBlocking = 1;

MemAllocationProp shareableOn(int device) {
  MemAllocationProp p = {};
  p.type = 1;
  p.requestedHandleType = kPosixFileDescriptor;
  p.location = {1, device};
  return p;
}

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
  // Optional: shared memory between processes, stream memory operations, pitched copies.
  hipError_t (*memGetAllocationGranularity)(size_t *, const MemAllocationProp *, int) = nullptr;
  hipError_t (*memCreate)(hipMemGenericAllocationHandle_t *, size_t, const MemAllocationProp *,
                          unsigned long long) = nullptr;
  hipError_t (*memExportToShareableHandle)(void *, hipMemGenericAllocationHandle_t, int, unsigned long long) = nullptr;
  hipError_t (*memImportFromShareableHandle)(hipMemGenericAllocationHandle_t *, void *, int) = nullptr;
  hipError_t (*memRelease)(hipMemGenericAllocationHandle_t) = nullptr;
  hipError_t (*memAddressReserve)(void **, size_t, size_t, void *, unsigned long long) = nullptr;
  hipError_t (*memAddressFree)(void *, size_t) = nullptr;
  hipError_t (*memMap)(void *, size_t, size_t, hipMemGenericAllocationHandle_t, unsigned long long) = nullptr;
  hipError_t (*memUnmap)(void *, size_t) = nullptr;
  hipError_t (*memSetAccess)(void *, size_t, const MemAccessDesc *, size_t) = nullptr;
  hipError_t (*memcpy2DAsync)(void *, size_t, const void *, size_t, size_t, size_t, int, hipStream_t) = nullptr;
  hipError_t (*streamWaitValue32)(hipStream_t, void *, uint32_t, unsigned, uint32_t) = nullptr;
  hipError_t (*streamWriteValue32)(hipStream_t, void *, uint32_t, unsigned) = nullptr;
  hipError_t (*streamCreateWithFlags)(hipStream_t *, unsigned) = nullptr;
  hipError_t (*streamDestroy)(hipStream_t) = nullptr;
};

void *asPtr(uint64_t p) { return reinterpret_cast<void *>(static_cast<uintptr_t>(p)); }
uint64_t asInt(const void *p) { return reinterpret_cast<uintptr_t>(p); }

// Decode CP's calls (DeviceApi::SharedMemory, the stream words, copyRowsAsync), where the runtime
// has every one of them (ROCm 6.1+). Built to ROCm's declarations and checked against a stand-in
// (tests/runtime/hip/fake_hip.c); no AMD GPU was at hand to run them. ROCm documents
// hipStreamWaitValue32 for signal memory (hipMallocSignalMemory): whether it waits on mapped
// shareable memory as CUDA's does is unproven.
void loadSharing(void *h, const std::string &path, Entry &e, runtime::DeviceApi &a) {
  using runtime::resolveSymbol;
  for (Status s : {resolveSymbol(h, path, "hipMemGetAllocationGranularity", e.memGetAllocationGranularity),
                   resolveSymbol(h, path, "hipMemCreate", e.memCreate),
                   resolveSymbol(h, path, "hipMemExportToShareableHandle", e.memExportToShareableHandle),
                   resolveSymbol(h, path, "hipMemImportFromShareableHandle", e.memImportFromShareableHandle),
                   resolveSymbol(h, path, "hipMemRelease", e.memRelease),
                   resolveSymbol(h, path, "hipMemAddressReserve", e.memAddressReserve),
                   resolveSymbol(h, path, "hipMemAddressFree", e.memAddressFree),
                   resolveSymbol(h, path, "hipMemMap", e.memMap),
                   resolveSymbol(h, path, "hipMemUnmap", e.memUnmap),
                   resolveSymbol(h, path, "hipMemSetAccess", e.memSetAccess),
                   resolveSymbol(h, path, "hipMemcpy2DAsync", e.memcpy2DAsync),
                   resolveSymbol(h, path, "hipStreamWaitValue32", e.streamWaitValue32),
                   resolveSymbol(h, path, "hipStreamWriteValue32", e.streamWriteValue32),
                   resolveSymbol(h, path, "hipStreamCreateWithFlags", e.streamCreateWithFlags),
                   resolveSymbol(h, path, "hipStreamDestroy", e.streamDestroy)})
    if (!s.ok())
      return;
  runtime::DeviceApi::SharedMemory &m = a.shared;
  m.granularity = [e](int device, size_t *g) {
    const MemAllocationProp p = shareableOn(device);
    return e.memGetAllocationGranularity(g, &p, kGranularityRecommended);
  };
  m.create = [e](int device, size_t bytes, uint64_t *handle) {
    const MemAllocationProp p = shareableOn(device);
    hipMemGenericAllocationHandle_t h = nullptr;
    hipError_t r = e.memCreate(&h, bytes, &p, 0);
    *handle = asInt(h);
    return r;
  };
  m.exportFd = [e](uint64_t handle, int *fd) {
    return e.memExportToShareableHandle(fd, asPtr(handle), kPosixFileDescriptor, 0);
  };
  m.importFd = [e](int fd, uint64_t *handle) {
    hipMemGenericAllocationHandle_t h = nullptr;
    hipError_t r = e.memImportFromShareableHandle(&h, reinterpret_cast<void *>(static_cast<intptr_t>(fd)),
                                                  kPosixFileDescriptor);
    *handle = asInt(h);
    return r;
  };
  m.release = [e](uint64_t handle) { return e.memRelease(asPtr(handle)); };
  m.reserve = [e](size_t bytes, uint64_t *va) {
    void *p = nullptr;
    hipError_t r = e.memAddressReserve(&p, bytes, 0, nullptr, 0);
    *va = asInt(p);
    return r;
  };
  m.unreserve = [e](uint64_t va, size_t bytes) { return e.memAddressFree(asPtr(va), bytes); };
  m.map = [e](uint64_t va, size_t bytes, uint64_t handle) { return e.memMap(asPtr(va), bytes, 0, asPtr(handle), 0); };
  m.unmap = [e](uint64_t va, size_t bytes) { return e.memUnmap(asPtr(va), bytes); };
  m.allowReadWrite = [e](int device, uint64_t va, size_t bytes) {
    const MemAccessDesc d = {{1, device}, 3};
    return e.memSetAccess(asPtr(va), bytes, &d, 1);
  };
  a.copyRowsAsync = [e](uint64_t dst, size_t dstPitch, uint64_t src, size_t srcPitch, size_t rowBytes, size_t rows,
                        void *stream) {
    return e.memcpy2DAsync(asPtr(dst), dstPitch, asPtr(src), srcPitch, rowBytes, rows, kDeviceToDevice, stream);
  };
  a.createNonBlockingStream = [e](void **stream) { return e.streamCreateWithFlags(stream, kNonBlocking); };
  a.destroyStream = [e](void *stream) { return e.streamDestroy(stream); };
  a.waitWordEquals = [e](void *stream, uint64_t word, uint32_t v) {
    return e.streamWaitValue32(stream, asPtr(word), v, kWaitValueEq, 0xFFFFFFFFu);
  };
  a.writeWord = [e](void *stream, uint64_t word, uint32_t v) { return e.streamWriteValue32(stream, asPtr(word), v, 0); };
}

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
  loadSharing(h, path, e, a);
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
