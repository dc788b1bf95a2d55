/* A stand-in CUDA driver for the bad-input tests of machines without a GPU: memory is host memory
 * and launches do nothing, so only failure paths may be tested through it. The device reports the
 * compute capability in M3IDX_FAKE_CUDA_CC (default 90); M3IDX_FAKE_CUDA_VERSION (a driver version
 * such as 12020) below 12040 makes every module load fail as an old driver's does on newer PTX.
 * cuLaunchKernelEx takes only cuda.h's layout of one programmatic-launch attribute (else an invalid
 * argument); M3IDX_FAKE_CUDA_REFUSE_EX=1 makes it refuse such a launch, so a test can see one.
 * Shared memory and stream memory operations are tests/runtime/fake_vmm.h's (a wait fails after
 * M3IDX_FAKE_CUDA_WAIT_MS); M3IDX_FAKE_CUDA_NO_VMM=1 makes cuMemCreate unsupported. */
#include "../fake_vmm.h"

#include <string.h>

typedef int CUresult;
enum { kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kUnsupportedPtxVersion = 222, kNotPermitted = 800,
       kNotSupported = 801, kTimeout = 909 };

#define envInt fake_env_int

CUresult cuGetErrorString(CUresult code, const char **text) {
  *text = code == kUnsupportedPtxVersion ? "the provided PTX was compiled with an unsupported toolchain."
           : code == kNotPermitted       ? "operation not permitted (the stand-in refuses programmatic launches)"
           : code == kInvalidValue       ? "invalid argument"
                                         : "fake driver error";
  return kSuccess;
}
CUresult cuInit(unsigned flags) { (void)flags; return kSuccess; }
CUresult cuDriverGetVersion(int *v) { *v = envInt("M3IDX_FAKE_CUDA_VERSION", 13000); return kSuccess; }
CUresult cuDeviceGet(int *dev, int ordinal) { *dev = ordinal; return kSuccess; }
CUresult cuDeviceGetName(char *name, int n, int dev) { (void)dev; strncpy(name, "Fake GPU", n); return kSuccess; }
CUresult cuDeviceGetAttribute(int *v, int attribute, int dev) {
  (void)dev;
  const int cc = envInt("M3IDX_FAKE_CUDA_CC", 90);
  *v = attribute == 75 ? cc / 10 : cc % 10;
  return kSuccess;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)dev; *ctx = (void *)1; return kSuccess; }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; return kSuccess; }
CUresult cuCtxSynchronize(void) { return kSuccess; }
CUresult cuStreamSynchronize(void *stream) { (void)stream; return kSuccess; }
CUresult cuStreamIsCapturing(void *stream, int *status) { (void)stream; *status = 0; return kSuccess; }
CUresult cuModuleLoadData(void **module, const void *image) {
  (void)image;
  *module = (void *)1;
  return envInt("M3IDX_FAKE_CUDA_VERSION", 13000) < 12040 ? kUnsupportedPtxVersion : kSuccess;
}
CUresult cuModuleGetFunction(void **f, void *module, const char *name) { (void)module; (void)name; *f = (void *)1; return kSuccess; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared; (void)stream; (void)params;
  (void)extra;
  return kSuccess;
}
/* cuda.h's CUlaunchAttribute (an id, padding to 8 bytes, a 64-byte union) and CUlaunchConfig. */
typedef struct {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int value;
    unsigned long long aligned;
  } value;
} LaunchAttribute;
typedef struct {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  void *stream;
  LaunchAttribute *attrs;
  unsigned numAttrs;
} LaunchConfig;
CUresult cuLaunchKernelEx(const LaunchConfig *c, void *f, void **params, void **extra) {
  enum { kProgrammaticStreamSerialization = 6 };
  if (!c || c->numAttrs != 1 || !c->attrs || c->attrs[0].id != kProgrammaticStreamSerialization ||
      c->attrs[0].value.value != 1 || c->gridDimX == 0 || c->gridDimY != 1 || c->gridDimZ != 1 || c->blockDimX == 0 ||
      c->blockDimY != 1 || c->blockDimZ != 1)
    return kInvalidValue;
  if (envInt("M3IDX_FAKE_CUDA_REFUSE_EX", 0))
    return kNotPermitted;
  return cuLaunchKernel(f, c->gridDimX, 1, 1, c->blockDimX, 1, 1, c->sharedMemBytes, c->stream, params, extra);
}
CUresult cuMemAlloc_v2(unsigned long long *p, size_t n) { *p = (unsigned long long)malloc(n); return *p ? kSuccess : 2; }
CUresult cuMemFree_v2(unsigned long long p) { free((void *)p); return kSuccess; }
CUresult cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n) { memcpy((void *)d, s, n); return kSuccess; }
CUresult cuMemcpyDtoH_v2(void *d, unsigned long long s, size_t n) { memcpy(d, (void *)s, n); return kSuccess; }
CUresult cuMemcpyHtoDAsync_v2(unsigned long long d, const void *s, size_t n, void *stream) {
  (void)stream;
  return cuMemcpyHtoD_v2(d, s, n);
}
CUresult cuMemcpyDtoDAsync_v2(unsigned long long d, unsigned long long s, size_t n, void *stream) {
  (void)stream;
  memcpy((void *)d, (void *)s, n);
  return kSuccess;
}
/* CUDA_MEMCPY2D's fields that m3idx sets (device to device): cuda.h's offsets */
CUresult cuMemcpy2DAsync_v2(const void *m, void *stream) {
  (void)stream;
  const char *c = (const char *)m;
  const unsigned long long src = *(const unsigned long long *)(c + 32), dst = *(const unsigned long long *)(c + 88);
  const size_t srcPitch = *(const size_t *)(c + 48), dstPitch = *(const size_t *)(c + 104);
  const size_t width = *(const size_t *)(c + 112), height = *(const size_t *)(c + 120);
  if (*(const int *)(c + 16) != 2 || *(const int *)(c + 72) != 2)
    return kInvalidValue;
  fake_copy_rows((void *)dst, dstPitch, (const void *)src, srcPitch, width, height);
  return kSuccess;
}
CUresult cuMemsetD8Async(unsigned long long d, unsigned char v, size_t n, void *stream) {
  (void)stream;
  memset((void *)d, v, n);
  return kSuccess;
}
CUresult cuEventCreate(void **e, unsigned flags) { (void)flags; *e = (void *)1; return kSuccess; }
CUresult cuEventDestroy_v2(void *e) { (void)e; return kSuccess; }
CUresult cuEventRecord(void *e, void *stream) { (void)e; (void)stream; return kSuccess; }
CUresult cuEventSynchronize(void *e) { (void)e; return kSuccess; }
CUresult cuStreamWaitEvent(void *stream, void *e, unsigned flags) { (void)stream; (void)e; (void)flags; return kSuccess; }
CUresult cuEventElapsedTime(float *ms, void *start, void *stop) { (void)start; (void)stop; *ms = 0; return kSuccess; }

/* Shared memory (fake_vmm.h). */
CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop, int option) {
  (void)prop; (void)option;
  *g = 65536;
  return kSuccess;
}
CUresult cuMemCreate(unsigned long long *h, size_t n, const void *prop, unsigned long long flags) {
  (void)prop; (void)flags;
  if (envInt("M3IDX_FAKE_CUDA_NO_VMM", 0))
    return kNotSupported;
  return fake_vmm_create(n, h) == 0 ? kSuccess : kOutOfMemory;
}
CUresult cuMemExportToShareableHandle(void *out, unsigned long long h, int type, unsigned long long flags) {
  (void)flags;
  return type == 1 && fake_vmm_export(h, (int *)out) == 0 ? kSuccess : kInvalidValue;
}
CUresult cuMemImportFromShareableHandle(unsigned long long *h, void *os, int type) {
  return type == 1 && fake_vmm_import((int)(intptr_t)os, h) == 0 ? kSuccess : kInvalidValue;
}
CUresult cuMemRelease(unsigned long long h) { return fake_vmm_release(h) == 0 ? kSuccess : kInvalidValue; }
CUresult cuMemAddressReserve(unsigned long long *p, size_t n, size_t align, unsigned long long addr,
                             unsigned long long flags) {
  (void)align; (void)addr; (void)flags;
  void *v = NULL;
  if (fake_vmm_reserve(n, &v) != 0)
    return kOutOfMemory;
  *p = (unsigned long long)v;
  return kSuccess;
}
CUresult cuMemAddressFree(unsigned long long p, size_t n) { return fake_vmm_unreserve((void *)p, n) == 0 ? kSuccess : kInvalidValue; }
CUresult cuMemMap(unsigned long long p, size_t n, size_t offset, unsigned long long h, unsigned long long flags) {
  (void)flags;
  return fake_vmm_map((void *)p, n, offset, h) == 0 ? kSuccess : kInvalidValue;
}
CUresult cuMemUnmap(unsigned long long p, size_t n) { return fake_vmm_unmap((void *)p, n) == 0 ? kSuccess : kInvalidValue; }
CUresult cuMemSetAccess(unsigned long long p, size_t n, const void *desc, size_t count) {
  (void)p; (void)n; (void)desc;
  return count == 1 ? kSuccess : kInvalidValue;
}

CUresult cuStreamCreate(void **stream, unsigned flags) {
  (void)flags;
  *stream = malloc(1); /* a distinct handle; work on it runs at once, as on every stream here */
  return *stream ? kSuccess : kOutOfMemory;
}
CUresult cuStreamDestroy_v2(void *stream) {
  free(stream);
  return kSuccess;
}
/* Stream memory operations, at once. */
CUresult cuStreamWriteValue32_v2(void *stream, unsigned long long addr, unsigned value, unsigned flags) {
  (void)stream; (void)flags;
  fake_write_word((void *)addr, value);
  return kSuccess;
}
CUresult cuStreamWaitValue32_v2(void *stream, unsigned long long addr, unsigned value, unsigned flags) {
  (void)stream;
  if (flags != 1) /* CU_STREAM_WAIT_VALUE_EQ only */
    return kInvalidValue;
  return fake_wait_word((const void *)addr, value, "M3IDX_FAKE_CUDA_WAIT_MS") == 0 ? kSuccess : kTimeout;
}
