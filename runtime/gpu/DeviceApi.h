// The driver operations a GPU backend needs, the same for the CUDA driver and the HIP runtime. Each
// loader (cuda/CudaDriver, hip/HipRuntime) fills them from its library, found with dlopen at run
// time, so no GPU SDK is needed to build; every call returns the platform's error code (0: success).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/Status.h"

namespace m3idx::runtime {

struct DeviceApi {
  std::string platform; // "CUDA", "HIP": prefixes every error
  std::string library;  // the library that was loaded
  // Selects `device` for this thread (and its primary context) and reads its name.
  std::function<int(int device, std::string *name)> openDevice;
  // The device's architecture as code targets name it ("sm_90"); unset where the platform's loader
  // cannot tell (HIP: the code object loader refuses another gfx then).
  std::function<int(int device, std::string *arch)> deviceArch;
  std::function<int(uint64_t *ptr, size_t bytes)> alloc;
  std::function<int(uint64_t ptr)> free;
  std::function<int(uint64_t dst, const void *src, size_t bytes)> upload;
  std::function<int(void *dst, uint64_t src, size_t bytes)> download;
  // Ordered on `stream`. From pageable memory both drivers stage the bytes before returning, so the
  // source may be reused at once (CUDA's "API synchronization behavior"; HIP does the same).
  std::function<int(uint64_t dst, const void *src, size_t bytes, void *stream)> uploadAsync;
  // Device-to-device on the default stream; may return before it completes (synchronize).
  std::function<int(uint64_t dst, uint64_t src, size_t bytes)> copy;
  // `rows` rows of `rowBytes` bytes, device to device, rows `srcPitch` and `dstPitch` bytes apart,
  // ordered on `stream` (a graph captures it). Unset where the platform's library lacks it.
  std::function<int(uint64_t dst, size_t dstPitch, uint64_t src, size_t srcPitch, size_t rowBytes, size_t rows,
                    void *stream)>
      copyRowsAsync;
  std::function<int()> synchronize;
  std::function<int(void *stream)> streamSynchronize;
  // Whether work queued on `stream` is being captured into a graph (then nothing may wait on it).
  std::function<int(void *stream, bool *capturing)> streamIsCapturing;
  std::function<int(void **module, const void *image)> loadModule;
  std::function<int(void **function, void *module, const char *name)> getFunction;
  // One-dimensional grid of `programs` blocks of `threads`, on `stream` (null: the default one).
  // afterPrevious: the kernel awaits the kernels before it itself (kernels_src's grid.await), so
  // its programs may start while the launch before it on the stream still runs (CUDA: the
  // programmatic stream serialization attribute; a platform without it launches as usual).
  std::function<int(void *function, unsigned programs, unsigned threads, void *stream, void **params,
                    bool afterPrevious)>
      launch;
  // Timing on a stream: events recorded between launches, waited for, and compared (CUDA / HIP
  // events, in milliseconds).
  std::function<int(void **event)> eventCreate;
  std::function<int(void *event)> eventDestroy;
  std::function<int(void *event, void *stream)> eventRecord;
  std::function<int(void *event)> eventSynchronize;
  // Work queued on `stream` after this call waits for `event` (recorded on another stream).
  std::function<int(void *stream, void *event)> streamWaitEvent;
  std::function<int(float *ms, void *start, void *stop)> eventElapsedMs;
  // Sets `bytes` bytes at dst to `value`, ordered on `stream` (benchmarks flush L2 with it).
  std::function<int(uint64_t dst, uint8_t value, size_t bytes, void *stream)> memsetAsync;
  // Device memory shared between processes and mapped into one address range (decode context
  // parallelism across processes: gpu/PeerArray.h). Unset where the platform's library lacks any of
  // them (CUDA's virtual memory calls; HIP's, ROCm 6.1+). Handles are the driver's allocation
  // handles; a shareable one is exported and imported as a POSIX file descriptor.
  struct SharedMemory {
    std::function<int(int device, size_t *granularity)> granularity; // of an allocation's size and mapping
    std::function<int(int device, size_t bytes, uint64_t *handle)> create;
    std::function<int(uint64_t handle, int *fd)> exportFd;   // a new descriptor, the caller's to close
    std::function<int(int fd, uint64_t *handle)> importFd;   // fd stays the caller's
    std::function<int(uint64_t handle)> release;
    std::function<int(size_t bytes, uint64_t *va)> reserve;  // an address range, nothing mapped
    std::function<int(uint64_t va, size_t bytes)> unreserve;
    std::function<int(uint64_t va, size_t bytes, uint64_t handle)> map;
    std::function<int(uint64_t va, size_t bytes)> unmap;
    std::function<int(int device, uint64_t va, size_t bytes)> allowReadWrite;
  };
  SharedMemory shared;
  bool hasSharedMemory() const { return static_cast<bool>(shared.create); }
  // Stream-ordered 32-bit words in device memory (CUDA's / HIP's stream memory operations, which
  // a graph captures): queued work after waitWordEquals waits until the word holds `value`;
  // writeWord stores it after the work before it, all of its memory writes visible first. Unset
  // where the platform's library lacks them.
  std::function<int(void *stream, uint64_t word, uint32_t value)> waitWordEquals;
  std::function<int(void *stream, uint64_t word, uint32_t value)> writeWord;
  // A stream that neither waits for nor holds up the legacy default stream (CUDA's
  // CU_STREAM_NON_BLOCKING): a word written there reaches a wait queued on any other stream, where
  // a synchronous copy would queue behind that very wait. Set with the two above.
  std::function<int(void **stream)> createNonBlockingStream;
  std::function<int(void *stream)> destroyStream;
  std::function<const char *(int code)> errorString;
  // What a failed call's code means for m3idx beyond the platform's error string ("" if nothing):
  // which driver a PTX needs, which GPU a code object is for.
  std::function<std::string(int code)> explainError;

  // "<platform> <call> failed: <error string> (code N)", or ok.
  Status check(int code, const char *call) const;
};

} // namespace m3idx::runtime
