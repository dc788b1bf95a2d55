#include "runtime/cuda/CudaDriver.h"

#include <cstddef>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>

#include "core/EnvTable.h"
#include "runtime/DynamicLibrary.h"

namespace m3idx::cuda {

namespace {

// The driver's own declarations (cuda.h), reduced to what m3idx calls.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUevent = void *;

// cuLaunchKernelEx's configuration with one attribute (cuda.h's CUlaunchConfig, CUlaunchAttribute).
struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int value;
  };
};
static_assert(sizeof(LaunchAttribute) == 72, "cuda.h's CUlaunchAttribute");
struct LaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  CUstream hStream;
  LaunchAttribute *attrs;
  unsigned numAttrs;
};
constexpr int kProgrammaticStreamSerialization = 6; // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION

// Virtual memory management (cuda.h's CUmemAllocationProp and CUmemAccessDesc, CUDA 10.2+).
struct MemLocation {
  int type; // CU_MEM_LOCATION_TYPE_DEVICE = 1
  int id;
};
struct MemAllocationProp {
  int type;                 // CU_MEM_ALLOCATION_TYPE_PINNED = 1
  int requestedHandleTypes; // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
  MemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType, gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
static_assert(sizeof(MemAllocationProp) == 32, "cuda.h's CUmemAllocationProp");
struct MemAccessDesc {
  MemLocation location;
  int flags; // CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
};
constexpr int kPosixFileDescriptor = 1, kGranularityRecommended = 1, kWaitValueEq = 1;

// CUDA_MEMCPY2D (cuda.h; 128 bytes, checked against CUDA 13's header)
struct Memcpy2D {
  size_t srcXInBytes, srcY;
  int srcMemoryType; // CU_MEMORYTYPE_DEVICE = 2
  const void *srcHost;
  CUdeviceptr srcDevice;
  void *srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void *dstHost;
  CUdeviceptr dstDevice;
  void *dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
};
static_assert(sizeof(Memcpy2D) == 128 && offsetof(Memcpy2D, dstXInBytes) == 56 && offsetof(Memcpy2D, Height) == 120);
constexpr int kDeviceMemory = 2;

MemAllocationProp shareableOn(int device) {
  MemAllocationProp p = {};
  p.type = 1;
  p.requestedHandleTypes = kPosixFileDescriptor;
  p.location = {1, device};
  return p;
}

struct Entry {
  CUresult (*getErrorString)(CUresult, const char **) = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*deviceGet)(CUdevice *, int) = nullptr;
  CUresult (*deviceGetName)(char *, int, CUdevice) = nullptr;
  CUresult (*deviceGetAttribute)(int *, int, CUdevice) = nullptr;
  CUresult (*driverGetVersion)(int *) = nullptr;
  CUresult (*primaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
  CUresult (*ctxSetCurrent)(CUcontext) = nullptr;
  CUresult (*ctxSynchronize)() = nullptr;
  CUresult (*streamSynchronize)(CUstream) = nullptr;
  CUresult (*streamIsCapturing)(CUstream, int *) = nullptr; // CUstreamCaptureStatus
  CUresult (*moduleLoadData)(CUmodule *, const void *) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr;
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **, void **) = nullptr;
  CUresult (*launchKernelEx)(const LaunchConfig *, CUfunction, void **, void **) = nullptr; // CUDA 12.0+
  CUresult (*memAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*memFree)(CUdeviceptr) = nullptr;
  CUresult (*memcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
  CUresult (*memcpyDtoH)(void *, CUdeviceptr, size_t) = nullptr;
  CUresult (*memcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream) = nullptr;
  CUresult (*memcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*memsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream) = nullptr;
  CUresult (*memcpy2DAsync)(const Memcpy2D *, CUstream) = nullptr;
  CUresult (*eventCreate)(CUevent *, unsigned) = nullptr;
  CUresult (*eventDestroy)(CUevent) = nullptr;
  CUresult (*eventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*eventSynchronize)(CUevent) = nullptr;
  CUresult (*streamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*eventElapsedTime)(float *, CUevent, CUevent) = nullptr;
  // Optional: shared memory between processes and stream memory operations.
  CUresult (*memGetAllocationGranularity)(size_t *, const MemAllocationProp *, int) = nullptr;
  CUresult (*memCreate)(unsigned long long *, size_t, const MemAllocationProp *, unsigned long long) = nullptr;
  CUresult (*memExportToShareableHandle)(void *, unsigned long long, int, unsigned long long) = nullptr;
  CUresult (*memImportFromShareableHandle)(unsigned long long *, void *, int) = nullptr;
  CUresult (*memRelease)(unsigned long long) = nullptr;
  CUresult (*memAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*memAddressFree)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memMap)(CUdeviceptr, size_t, size_t, unsigned long long, unsigned long long) = nullptr;
  CUresult (*memUnmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memSetAccess)(CUdeviceptr, size_t, const MemAccessDesc *, size_t) = nullptr;
  CUresult (*streamWaitValue32)(CUstream, CUdeviceptr, unsigned, unsigned) = nullptr;
  CUresult (*streamWriteValue32)(CUstream, CUdeviceptr, unsigned, unsigned) = nullptr;
  CUresult (*streamCreate)(CUstream *, unsigned) = nullptr;
  CUresult (*streamDestroy)(CUstream) = nullptr;
};

// The shared memory and stream memory operations, where the driver has every one of them.
void loadSharing(void *h, const std::string &path, Entry &e, runtime::DeviceApi &a) {
  using runtime::resolveSymbol;
  for (Status s : {resolveSymbol(h, path, "cuMemGetAllocationGranularity", e.memGetAllocationGranularity),
                   resolveSymbol(h, path, "cuMemCreate", e.memCreate),
                   resolveSymbol(h, path, "cuMemExportToShareableHandle", e.memExportToShareableHandle),
                   resolveSymbol(h, path, "cuMemImportFromShareableHandle", e.memImportFromShareableHandle),
                   resolveSymbol(h, path, "cuMemRelease", e.memRelease),
                   resolveSymbol(h, path, "cuMemAddressReserve", e.memAddressReserve),
                   resolveSymbol(h, path, "cuMemAddressFree", e.memAddressFree),
                   resolveSymbol(h, path, "cuMemMap", e.memMap),
                   resolveSymbol(h, path, "cuMemUnmap", e.memUnmap),
                   resolveSymbol(h, path, "cuMemSetAccess", e.memSetAccess)})
    if (!s.ok())
      return;
  runtime::DeviceApi::SharedMemory &m = a.shared;
  m.granularity = [e](int device, size_t *g) {
    const MemAllocationProp p = shareableOn(device);
    return e.memGetAllocationGranularity(g, &p, kGranularityRecommended);
  };
  m.create = [e](int device, size_t bytes, uint64_t *handle) {
    const MemAllocationProp p = shareableOn(device);
    unsigned long long h = 0;
    CUresult r = e.memCreate(&h, bytes, &p, 0);
    *handle = h;
    return r;
  };
  m.exportFd = [e](uint64_t handle, int *fd) { return e.memExportToShareableHandle(fd, handle, kPosixFileDescriptor, 0); };
  m.importFd = [e](int fd, uint64_t *handle) {
    unsigned long long h = 0;
    CUresult r = e.memImportFromShareableHandle(&h, reinterpret_cast<void *>(static_cast<intptr_t>(fd)),
                                                kPosixFileDescriptor);
    *handle = h;
    return r;
  };
  m.release = [e](uint64_t handle) { return e.memRelease(handle); };
  m.reserve = [e](size_t bytes, uint64_t *va) {
    CUdeviceptr p = 0;
    CUresult r = e.memAddressReserve(&p, bytes, 0, 0, 0);
    *va = p;
    return r;
  };
  m.unreserve = [e](uint64_t va, size_t bytes) { return e.memAddressFree(va, bytes); };
  m.map = [e](uint64_t va, size_t bytes, uint64_t handle) { return e.memMap(va, bytes, 0, handle, 0); };
  m.unmap = [e](uint64_t va, size_t bytes) { return e.memUnmap(va, bytes); };
  m.allowReadWrite = [e](int device, uint64_t va, size_t bytes) {
    const MemAccessDesc d = {{1, device}, 3};
    return e.memSetAccess(va, bytes, &d, 1);
  };
  if (resolveSymbol(h, path, "cuStreamWaitValue32_v2", e.streamWaitValue32).ok() &&
      resolveSymbol(h, path, "cuStreamWriteValue32_v2", e.streamWriteValue32).ok() &&
      resolveSymbol(h, path, "cuStreamCreate", e.streamCreate).ok() &&
      resolveSymbol(h, path, "cuStreamDestroy_v2", e.streamDestroy).ok()) {
    constexpr unsigned kNonBlocking = 1; // CU_STREAM_NON_BLOCKING
    a.createNonBlockingStream = [e](void **stream) {
      CUstream s = nullptr;
      CUresult r = e.streamCreate(&s, kNonBlocking);
      *stream = s;
      return r;
    };
    a.destroyStream = [e](void *stream) { return e.streamDestroy(static_cast<CUstream>(stream)); };
    // The default write orders the stream's earlier memory writes before the word (a fence of
    // the system's scope), which is what a peer reading after the word needs.
    a.waitWordEquals = [e](void *stream, uint64_t word, uint32_t v) { return e.streamWaitValue32(stream, word, v, kWaitValueEq); };
    a.writeWord = [e](void *stream, uint64_t word, uint32_t v) { return e.streamWriteValue32(stream, word, v, 0); };
  }
}

StatusOr<runtime::DeviceApi> load(const std::string &path) {
  using runtime::resolveSymbol;
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return Status::error(fmt::format("cuda: cannot load the driver library {}: {}", path, dlerror()));
  Entry e;
  for (Status s : {resolveSymbol(h, path, "cuGetErrorString", e.getErrorString),
                   resolveSymbol(h, path, "cuInit", e.init),
                   resolveSymbol(h, path, "cuDeviceGet", e.deviceGet),
                   resolveSymbol(h, path, "cuDeviceGetName", e.deviceGetName),
                   resolveSymbol(h, path, "cuDeviceGetAttribute", e.deviceGetAttribute),
                   resolveSymbol(h, path, "cuDriverGetVersion", e.driverGetVersion),
                   resolveSymbol(h, path, "cuDevicePrimaryCtxRetain", e.primaryCtxRetain),
                   resolveSymbol(h, path, "cuCtxSetCurrent", e.ctxSetCurrent),
                   resolveSymbol(h, path, "cuCtxSynchronize", e.ctxSynchronize),
                   resolveSymbol(h, path, "cuStreamSynchronize", e.streamSynchronize),
                   resolveSymbol(h, path, "cuStreamIsCapturing", e.streamIsCapturing),
                   resolveSymbol(h, path, "cuModuleLoadData", e.moduleLoadData),
                   resolveSymbol(h, path, "cuModuleGetFunction", e.moduleGetFunction),
                   resolveSymbol(h, path, "cuLaunchKernel", e.launchKernel),
                   resolveSymbol(h, path, "cuMemAlloc_v2", e.memAlloc),
                   resolveSymbol(h, path, "cuMemFree_v2", e.memFree),
                   resolveSymbol(h, path, "cuMemcpyHtoD_v2", e.memcpyHtoD),
                   resolveSymbol(h, path, "cuMemcpyDtoH_v2", e.memcpyDtoH),
                   resolveSymbol(h, path, "cuMemcpyHtoDAsync_v2", e.memcpyHtoDAsync),
                   resolveSymbol(h, path, "cuMemcpyDtoDAsync_v2", e.memcpyDtoDAsync),
                   resolveSymbol(h, path, "cuMemsetD8Async", e.memsetD8Async),
                   resolveSymbol(h, path, "cuMemcpy2DAsync_v2", e.memcpy2DAsync),
                   resolveSymbol(h, path, "cuEventCreate", e.eventCreate),
                   resolveSymbol(h, path, "cuEventDestroy_v2", e.eventDestroy),
                   resolveSymbol(h, path, "cuEventRecord", e.eventRecord),
                   resolveSymbol(h, path, "cuEventSynchronize", e.eventSynchronize),
                   resolveSymbol(h, path, "cuStreamWaitEvent", e.streamWaitEvent),
                   resolveSymbol(h, path, "cuEventElapsedTime", e.eventElapsedTime)})
    if (!s.ok()) {
      dlclose(h);
      return Status::error("cuda: " + s.message());
    }
  runtime::DeviceApi a;
  a.platform = "CUDA";
  a.library = path;
  a.errorString = [e](int code) {
    const char *text = nullptr;
    e.getErrorString(code, &text);
    return text;
  };
  a.openDevice = [e](int device, std::string *name) {
    CUdevice dev;
    char buf[256] = {};
    CUcontext ctx;
    CUresult r = e.deviceGet(&dev, device);
    if (r == 0)
      r = e.deviceGetName(buf, sizeof buf, dev);
    if (r == 0)
      r = e.primaryCtxRetain(&ctx, dev);
    if (r == 0)
      r = e.ctxSetCurrent(ctx);
    *name = buf;
    return r;
  };
  a.deviceArch = [e](int device, std::string *arch) {
    constexpr int kMajor = 75, kMinor = 76; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
    CUdevice dev;
    int major = 0, minor = 0;
    CUresult r = e.deviceGet(&dev, device);
    if (r == 0)
      r = e.deviceGetAttribute(&major, kMajor, dev);
    if (r == 0)
      r = e.deviceGetAttribute(&minor, kMinor, dev);
    *arch = fmt::format("sm_{}{}", major, minor);
    return r;
  };
  a.explainError = [e](int code) -> std::string {
    constexpr CUresult kNoBinaryForGpu = 209, kUnsupportedPtxVersion = 222;
    if (code != kUnsupportedPtxVersion && code != kNoBinaryForGpu)
      return "";
    int version = 0;
    e.driverGetVersion(&version);
    // The PTX is ISA 8.4 (LLVM 22's NVPTX for sm_90a), which CUDA 12.4 introduced.
    return code == kNoBinaryForGpu
               ? "the code is for sm_90 (H100, H200, GH200) and this device is another"
               : fmt::format("this driver supports CUDA {}.{}, and m3idx's PTX (ISA 8.4) needs a driver for "
                             "CUDA 12.4 or newer (R550+)",
                             version / 1000, version % 1000 / 10);
  };
  a.alloc = [e](uint64_t *p, size_t n) {
    CUdeviceptr d = 0;
    CUresult r = e.memAlloc(&d, n);
    *p = d;
    return r;
  };
  a.free = [e](uint64_t p) { return e.memFree(p); };
  a.upload = [e](uint64_t d, const void *s, size_t n) { return e.memcpyHtoD(d, s, n); };
  a.download = [e](void *d, uint64_t s, size_t n) { return e.memcpyDtoH(d, s, n); };
  a.uploadAsync = [e](uint64_t d, const void *s, size_t n, void *stream) {
    return e.memcpyHtoDAsync(d, s, n, stream);
  };
  // Stream-ordered, as the kernels run: the synchronous cuMemcpyDtoD measured 3.7-3.8 TB/s where
  // cudaMemcpyAsync of the same bytes reaches 4.28 TB/s on the H200 (bench/RESULTS.md).
  a.copy = [e](uint64_t d, uint64_t s, size_t n) { return e.memcpyDtoDAsync(d, s, n, nullptr); };
  a.copyRowsAsync = [e](uint64_t d, size_t dPitch, uint64_t s, size_t sPitch, size_t rowBytes, size_t rows,
                        void *stream) {
    Memcpy2D m = {};
    m.srcMemoryType = m.dstMemoryType = kDeviceMemory;
    m.srcDevice = s;
    m.srcPitch = sPitch;
    m.dstDevice = d;
    m.dstPitch = dPitch;
    m.WidthInBytes = rowBytes;
    m.Height = rows;
    return e.memcpy2DAsync(&m, stream);
  };
  a.synchronize = [e] { return e.ctxSynchronize(); };
  a.streamSynchronize = [e](void *stream) { return e.streamSynchronize(stream); };
  a.streamIsCapturing = [e](void *stream, bool *capturing) {
    int status = 0; // CU_STREAM_CAPTURE_STATUS_NONE
    CUresult r = e.streamIsCapturing(stream, &status);
    *capturing = status != 0;
    return r;
  };
  a.eventCreate = [e](void **ev) { return e.eventCreate(ev, 0); }; // CU_EVENT_DEFAULT: timed
  a.eventDestroy = [e](void *ev) { return e.eventDestroy(ev); };
  a.eventRecord = [e](void *ev, void *stream) { return e.eventRecord(ev, stream); };
  a.eventSynchronize = [e](void *ev) { return e.eventSynchronize(ev); };
  a.streamWaitEvent = [e](void *stream, void *ev) { return e.streamWaitEvent(stream, ev, 0); };
  a.eventElapsedMs = [e](float *ms, void *start, void *stop) {
    return e.eventElapsedTime(ms, start, stop);
  };
  a.memsetAsync = [e](uint64_t d, uint8_t v, size_t n, void *stream) {
    return e.memsetD8Async(d, v, n, stream);
  };
  a.loadModule = [e](void **m, const void *image) { return e.moduleLoadData(m, image); };
  a.getFunction = [e](void **f, void *m, const char *name) { return e.moduleGetFunction(f, m, name); };
  // A launch after the previous one lets the driver start the kernel's programs before that one
  // ends (programmatic dependent launch, sm_90 and newer): they wait in griddepcontrol.wait.
  // Optional (CUDA 12.0+): without it every launch is a plain one, and the kernels' waits pass.
  (void)resolveSymbol(h, path, "cuLaunchKernelEx", e.launchKernelEx);
  loadSharing(h, path, e, a);
  a.launch = [e](void *f, unsigned programs, unsigned threads, void *stream, void **params, bool afterPrevious) {
    if (!afterPrevious || !e.launchKernelEx)
      return e.launchKernel(f, programs, 1, 1, threads, 1, 1, 0, stream, params, nullptr);
    LaunchAttribute early = {};
    early.id = kProgrammaticStreamSerialization;
    early.value = 1;
    const LaunchConfig config = {programs, 1, 1, threads, 1, 1, 0, stream, &early, 1};
    return e.launchKernelEx(&config, f, params, nullptr);
  };
  if (Status s = a.check(e.init(0), "cuInit"); !s.ok())
    return s;
  return a;
}

} // namespace

StatusOr<const runtime::DeviceApi *> loadDriver() {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<runtime::DeviceApi>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string path = env::get("M3IDX_CUDA_LIBRARY");
  if (auto it = loaded.find(path); it != loaded.end())
    return it->second.get();
  StatusOr<runtime::DeviceApi> api = load(path);
  if (!api.ok())
    return api.status();
  auto &slot = loaded[path];
  slot = std::make_unique<runtime::DeviceApi>(std::move(api).value());
  return slot.get();
}

} // namespace m3idx::cuda
