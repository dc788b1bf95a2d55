/* A stand-in HIP runtime (libamdhip64) for machines without an AMD GPU: memory is host memory and
 * launches do nothing, so through it only the loader's calls and the host-side protocols are
 * tested: decode CP's shared memory, stream memory operations and pitched copies, whose arguments
 * it checks against hip_runtime_api.h's layouts and constants (an unexpected one is
 * hipErrorInvalidValue). Shared memory and waits are tests/runtime/fake_vmm.h's (a wait fails after
 * M3IDX_FAKE_HIP_WAIT_MS). */
#include "../fake_vmm.h"

#include <string.h>

typedef int hipError_t;
enum { hipSuccess = 0, hipErrorInvalidValue = 1, hipErrorOutOfMemory = 2, hipErrorTimeout = 909 };

/* hip_runtime_api.h's hipMemLocation, hipMemAllocationProp and hipMemAccessDesc */
typedef struct {
  int type; /* hipMemLocationTypeDevice = 1 */
  int id;
} MemLocation;
typedef struct {
  int type;                /* hipMemAllocationTypePinned = 1 */
  int requestedHandleType; /* hipMemHandleTypePosixFileDescriptor = 1 */
  MemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType, gpuDirectRDMACapable;
    unsigned short usage;
  } allocFlags;
} MemAllocationProp;
typedef struct {
  MemLocation location;
  int flags; /* hipMemAccessFlagsProtReadWrite = 3 */
} MemAccessDesc;

static int shareableProp(const MemAllocationProp *p) {
  return p && p->type == 1 && p->requestedHandleType == 1 && p->location.type == 1 && p->location.id >= 0;
}

const char *hipGetErrorString(hipError_t code) { return code == hipErrorInvalidValue ? "hipErrorInvalidValue" : "fake HIP error"; }
hipError_t hipInit(unsigned flags) { (void)flags; return hipSuccess; }
hipError_t hipDeviceGet(int *dev, int ordinal) { *dev = ordinal; return hipSuccess; }
hipError_t hipDeviceGetName(char *name, int n, int dev) { (void)dev; strncpy(name, "Fake AMD GPU", n); return hipSuccess; }
hipError_t hipSetDevice(int dev) { (void)dev; return hipSuccess; }
hipError_t hipDeviceSynchronize(void) { return hipSuccess; }
hipError_t hipModuleLoadData(void **module, const void *image) { (void)image; *module = (void *)1; return hipSuccess; }
hipError_t hipModuleGetFunction(void **f, void *module, const char *name) { (void)module; (void)name; *f = (void *)1; return hipSuccess; }
hipError_t hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                 unsigned shared, void *stream, void **params, void **extra) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared; (void)stream; (void)params;
  (void)extra;
  return hipSuccess;
}
hipError_t hipMalloc(void **p, size_t n) { *p = malloc(n); return *p ? hipSuccess : hipErrorOutOfMemory; }
hipError_t hipFree(void *p) { free(p); return hipSuccess; }
hipError_t hipMemcpyHtoD(void *d, const void *s, size_t n) { memcpy(d, s, n); return hipSuccess; }
hipError_t hipMemcpyDtoH(void *d, const void *s, size_t n) { memcpy(d, s, n); return hipSuccess; }
hipError_t hipMemcpyHtoDAsync(void *d, const void *s, size_t n, void *stream) { (void)stream; memcpy(d, s, n); return hipSuccess; }
hipError_t hipMemcpyDtoD(void *d, const void *s, size_t n) { memcpy(d, s, n); return hipSuccess; }
hipError_t hipMemsetD8Async(void *d, unsigned char v, size_t n, void *stream) { (void)stream; memset(d, v, n); return hipSuccess; }
hipError_t hipStreamSynchronize(void *stream) { (void)stream; return hipSuccess; }
hipError_t hipStreamIsCapturing(void *stream, int *status) { (void)stream; *status = 0; return hipSuccess; }
hipError_t hipEventCreate(void **e) { *e = (void *)1; return hipSuccess; }
hipError_t hipEventDestroy(void *e) { (void)e; return hipSuccess; }
hipError_t hipEventRecord(void *e, void *stream) { (void)e; (void)stream; return hipSuccess; }
hipError_t hipEventSynchronize(void *e) { (void)e; return hipSuccess; }
hipError_t hipStreamWaitEvent(void *stream, void *e, unsigned flags) { (void)stream; (void)e; (void)flags; return hipSuccess; }
hipError_t hipEventElapsedTime(float *ms, void *start, void *stop) { (void)start; (void)stop; *ms = 0; return hipSuccess; }

/* hipMemcpyDeviceToDevice = 3 */
hipError_t hipMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                            int kind, void *stream) {
  (void)stream;
  if (kind != 3 || width > dpitch || width > spitch)
    return hipErrorInvalidValue;
  fake_copy_rows(dst, dpitch, src, spitch, width, height);
  return hipSuccess;
}

/* Virtual memory management: a handle (hipMemGenericAllocationHandle_t) is fake_vmm.h's, as a pointer. */
hipError_t hipMemGetAllocationGranularity(size_t *g, const MemAllocationProp *prop, int option) {
  if (!shareableProp(prop) || option != 1) /* hipMemAllocationGranularityRecommended */
    return hipErrorInvalidValue;
  *g = 2 << 20;
  return hipSuccess;
}
hipError_t hipMemCreate(void **handle, size_t n, const MemAllocationProp *prop, unsigned long long flags) {
  unsigned long long h = 0;
  if (!shareableProp(prop) || flags != 0)
    return hipErrorInvalidValue;
  if (fake_vmm_create(n, &h) != 0)
    return hipErrorOutOfMemory;
  *handle = (void *)(uintptr_t)h;
  return hipSuccess;
}
hipError_t hipMemExportToShareableHandle(void *out, void *handle, int type, unsigned long long flags) {
  return type == 1 && flags == 0 && fake_vmm_export((uintptr_t)handle, (int *)out) == 0 ? hipSuccess : hipErrorInvalidValue;
}
hipError_t hipMemImportFromShareableHandle(void **handle, void *os, int type) {
  unsigned long long h = 0;
  if (type != 1 || fake_vmm_import((int)(intptr_t)os, &h) != 0)
    return hipErrorInvalidValue;
  *handle = (void *)(uintptr_t)h;
  return hipSuccess;
}
hipError_t hipMemRelease(void *handle) { return fake_vmm_release((uintptr_t)handle) == 0 ? hipSuccess : hipErrorInvalidValue; }
hipError_t hipMemAddressReserve(void **p, size_t n, size_t align, void *addr, unsigned long long flags) {
  (void)align;
  if (addr || flags)
    return hipErrorInvalidValue;
  return fake_vmm_reserve(n, p) == 0 ? hipSuccess : hipErrorOutOfMemory;
}
hipError_t hipMemAddressFree(void *p, size_t n) { return fake_vmm_unreserve(p, n) == 0 ? hipSuccess : hipErrorInvalidValue; }
hipError_t hipMemMap(void *p, size_t n, size_t offset, void *handle, unsigned long long flags) {
  return flags == 0 && fake_vmm_map(p, n, offset, (uintptr_t)handle) == 0 ? hipSuccess : hipErrorInvalidValue;
}
hipError_t hipMemUnmap(void *p, size_t n) { return fake_vmm_unmap(p, n) == 0 ? hipSuccess : hipErrorInvalidValue; }
hipError_t hipMemSetAccess(void *p, size_t n, const MemAccessDesc *desc, size_t count) {
  (void)p; (void)n;
  return count == 1 && desc->location.type == 1 && desc->flags == 3 ? hipSuccess : hipErrorInvalidValue;
}

/* hipStreamNonBlocking = 1 */
hipError_t hipStreamCreateWithFlags(void **stream, unsigned flags) {
  if (flags != 1)
    return hipErrorInvalidValue;
  *stream = malloc(1); /* a distinct handle; work on it runs at once, as on every stream here */
  return *stream ? hipSuccess : hipErrorOutOfMemory;
}
hipError_t hipStreamDestroy(void *stream) { free(stream); return hipSuccess; }
hipError_t hipStreamWriteValue32(void *stream, void *ptr, uint32_t value, unsigned flags) {
  (void)stream;
  if (flags != 0)
    return hipErrorInvalidValue;
  fake_write_word(ptr, value);
  return hipSuccess;
}
/* hipStreamWaitValueEq = 1, over the whole word */
hipError_t hipStreamWaitValue32(void *stream, void *ptr, uint32_t value, unsigned flags, uint32_t mask) {
  (void)stream;
  if (flags != 1 || mask != 0xFFFFFFFFu)
    return hipErrorInvalidValue;
  return fake_wait_word(ptr, value, "M3IDX_FAKE_HIP_WAIT_MS") == 0 ? hipSuccess : hipErrorTimeout;
}
