/* What the stand-in drivers (tests/runtime/cuda/fake_cuda.c, tests/runtime/hip/fake_hip.c) share:
 * device memory shared between processes as a memfd (an allocation is one, its export and import
 * are dup()s of it, an address range is a PROT_NONE reservation and a mapping maps the memfd into
 * it, so ranks that map each other's allocations see the same bytes, as on a GPU), and stream
 * memory operations done at once on host memory (a wait spins, failing after <prefix>_WAIT_MS,
 * default 10000, so a test cannot hang). Each returns 0 on success. */
#ifndef M3IDX_TESTS_FAKE_VMM_H
#define M3IDX_TESTS_FAKE_VMM_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int fake_env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

/* A handle is its memfd's descriptor + 1 (0 is no handle). */
static int fake_vmm_create(size_t n, unsigned long long *handle) {
  int fd = memfd_create("fake-gpu", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)n) != 0)
    return -1;
  *handle = (unsigned long long)fd + 1;
  return 0;
}
static int fake_vmm_export(unsigned long long handle, int *fd) {
  *fd = handle ? dup((int)handle - 1) : -1;
  return *fd >= 0 ? 0 : -1;
}
static int fake_vmm_import(int fd, unsigned long long *handle) {
  int own = dup(fd);
  if (own < 0)
    return -1;
  *handle = (unsigned long long)own + 1;
  return 0;
}
static int fake_vmm_release(unsigned long long handle) { return handle && close((int)handle - 1) == 0 ? 0 : -1; }
static int fake_vmm_reserve(size_t n, void **p) {
  void *v = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  *p = v == MAP_FAILED ? NULL : v;
  return v == MAP_FAILED ? -1 : 0;
}
static int fake_vmm_unreserve(void *p, size_t n) { return munmap(p, n); }
static int fake_vmm_map(void *p, size_t n, size_t offset, unsigned long long handle) {
  void *v = mmap(p, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, (int)handle - 1, (off_t)offset);
  return v == p ? 0 : -1;
}
static int fake_vmm_unmap(void *p, size_t n) {
  void *v = mmap(p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return v == p ? 0 : -1;
}

static void fake_write_word(void *addr, unsigned value) { __atomic_store_n((unsigned *)addr, value, __ATOMIC_RELEASE); }
/* Spins until the word holds `value`; -1 after the environment's limit. */
static int fake_wait_word(const void *addr, unsigned value, const char *limitVar) {
  const long limitMs = fake_env_int(limitVar, 10000);
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (__atomic_load_n((const unsigned *)addr, __ATOMIC_ACQUIRE) != value) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > limitMs)
      return -1;
    usleep(100);
  }
  return 0;
}

/* rows x width bytes, device to device, pitched */
static void fake_copy_rows(void *dst, size_t dstPitch, const void *src, size_t srcPitch, size_t width, size_t height) {
  for (size_t r = 0; r < height; ++r)
    __builtin_memcpy((char *)dst + r * dstPitch, (const char *)src + r * srcPitch, width);
}

#endif
