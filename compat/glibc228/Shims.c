/* The glibc 2.28 baseline of the shipped ELFs (manylinux_2_28): what the build machine's glibc
 * (2.36) would bind at a newer symbol version, bound here to the version glibc 2.28 already has.
 *
 * How: the link passes --wrap=<symbol> for every symbol below (compat/glibc228/CMakeLists.txt),
 * so each undefined reference, in our objects and in the static archives of LLVM, libstdc++ and
 * libgcc alike, resolves to __wrap_<symbol> here; each wrapper calls the same function at its
 * old version through a `.symver` alias (the old versions stay exported by every later glibc for
 * binaries built before them, so this runs on 2.28 and on 2.36 alike). Where 2.28 has no such
 * function (arc4random, _dl_find_object, mallinfo2, __libc_single_threaded) the wrapper
 * implements it over older calls.
 *
 * Why not an old sysroot or another compiler: Debian's packages give one glibc, and LLVM's static
 * archives are built with Debian's GCC against its libstdc++; these 30-odd wrappers are the whole
 * difference, and scripts/elf_policy.py fails the package if a new reference appears.
 *
 * Up to glibc 2.33 the pthread_* and dl* functions live in libpthread.so.0 and libdl.so.2: the
 * link names both as needed libraries, and the loader finds a symbol of the wanted version in any
 * loaded object, so the same binding resolves on both sides of the 2.34 merge. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define M3IDX_OLD(local, symbol, version) __asm__(".symver " #local "," #symbol "@" #version)
#define M3IDX_HIDDEN __attribute__((visibility("hidden")))

/* libm: 2.29 gave exp/exp2/log/log2/pow new versions without the SVID error wrappers; the
   results are the same functions. */
#define M3IDX_MATH1(name)                                                                           \
  double m3idx_old_##name(double);                                                                 \
  M3IDX_OLD(m3idx_old_##name, name, GLIBC_2.2.5);                                                  \
  M3IDX_HIDDEN double __wrap_##name(double x) { return m3idx_old_##name(x); }
M3IDX_MATH1(exp)
M3IDX_MATH1(exp2)
M3IDX_MATH1(log)
M3IDX_MATH1(log2)
double m3idx_old_pow(double, double);
M3IDX_OLD(m3idx_old_pow, pow, GLIBC_2.2.5);
M3IDX_HIDDEN double __wrap_pow(double x, double y) { return m3idx_old_pow(x, y); }

/* stat family: before 2.33 these were inline calls of __xstat(_STAT_VER, ...); _STAT_VER is 1
   and _MKNOD_VER 0 on x86_64. */
enum { kStatVer = 1, kMknodVer = 0 };
int m3idx_old_xstat(int, const char*, struct stat*);
int m3idx_old_lxstat(int, const char*, struct stat*);
int m3idx_old_fxstat(int, int, struct stat*);
int m3idx_old_xstat64(int, const char*, struct stat64*);
int m3idx_old_lxstat64(int, const char*, struct stat64*);
int m3idx_old_fxstat64(int, int, struct stat64*);
int m3idx_old_xmknod(int, const char*, mode_t, dev_t*);
M3IDX_OLD(m3idx_old_xstat, __xstat, GLIBC_2.2.5);
M3IDX_OLD(m3idx_old_lxstat, __lxstat, GLIBC_2.2.5);
M3IDX_OLD(m3idx_old_fxstat, __fxstat, GLIBC_2.2.5);
M3IDX_OLD(m3idx_old_xstat64, __xstat64, GLIBC_2.2.5);
M3IDX_OLD(m3idx_old_lxstat64, __lxstat64, GLIBC_2.2.5);
M3IDX_OLD(m3idx_old_fxstat64, __fxstat64, GLIBC_2.2.5);
M3IDX_OLD(m3idx_old_xmknod, __xmknod, GLIBC_2.2.5);
M3IDX_HIDDEN int __wrap_stat(const char* p, struct stat* s) { return m3idx_old_xstat(kStatVer, p, s); }
M3IDX_HIDDEN int __wrap_lstat(const char* p, struct stat* s) { return m3idx_old_lxstat(kStatVer, p, s); }
M3IDX_HIDDEN int __wrap_fstat(int fd, struct stat* s) { return m3idx_old_fxstat(kStatVer, fd, s); }
M3IDX_HIDDEN int __wrap_stat64(const char* p, struct stat64* s) { return m3idx_old_xstat64(kStatVer, p, s); }
M3IDX_HIDDEN int __wrap_lstat64(const char* p, struct stat64* s) { return m3idx_old_lxstat64(kStatVer, p, s); }
M3IDX_HIDDEN int __wrap_fstat64(int fd, struct stat64* s) { return m3idx_old_fxstat64(kStatVer, fd, s); }
M3IDX_HIDDEN int __wrap_mknod(const char* p, mode_t mode, dev_t dev) {
  return m3idx_old_xmknod(kMknodVer, p, mode, &dev);
}

/* mallinfo2 (2.33) over mallinfo: LLVM reads it only for memory statistics; int fields read as
   unsigned keep sizes up to 4 GiB right. */
struct mallinfo m3idx_old_mallinfo(void);
M3IDX_OLD(m3idx_old_mallinfo, mallinfo, GLIBC_2.2.5);
M3IDX_HIDDEN struct mallinfo2 __wrap_mallinfo2(void) {
  struct mallinfo m = m3idx_old_mallinfo();
  struct mallinfo2 r;
  r.arena = (unsigned)m.arena;
  r.ordblks = (unsigned)m.ordblks;
  r.smblks = (unsigned)m.smblks;
  r.hblks = (unsigned)m.hblks;
  r.hblkhd = (unsigned)m.hblkhd;
  r.usmblks = (unsigned)m.usmblks;
  r.fsmblks = (unsigned)m.fsmblks;
  r.uordblks = (unsigned)m.uordblks;
  r.fordblks = (unsigned)m.fordblks;
  r.keepcost = (unsigned)m.keepcost;
  return r;
}

/* libpthread's functions before their 2.34 move into libc (pthread_sigmask: 2.32). */
#define M3IDX_FORWARD(ret, name, version, params, args)                                             \
  ret m3idx_old_##name params;                                                                     \
  M3IDX_OLD(m3idx_old_##name, name, version);                                                      \
  M3IDX_HIDDEN ret __wrap_##name params { return m3idx_old_##name args; }
M3IDX_FORWARD(int, pthread_sigmask, GLIBC_2.2.5, (int how, const sigset_t* set, sigset_t* old), (how, set, old))
M3IDX_FORWARD(int, __pthread_key_create, GLIBC_2.2.5, (pthread_key_t* k, void (*d)(void*)), (k, d))
M3IDX_FORWARD(int, pthread_attr_setstacksize, GLIBC_2.2.5, (pthread_attr_t* a, size_t s), (a, s))
M3IDX_FORWARD(int, pthread_create, GLIBC_2.2.5,
              (pthread_t* t, const pthread_attr_t* a, void* (*f)(void*), void* arg), (t, a, f, arg))
M3IDX_FORWARD(int, pthread_detach, GLIBC_2.2.5, (pthread_t t), (t))
M3IDX_FORWARD(int, pthread_join, GLIBC_2.2.5, (pthread_t t, void** r), (t, r))
M3IDX_FORWARD(int, pthread_once, GLIBC_2.2.5, (pthread_once_t* o, void (*f)(void)), (o, f))
M3IDX_FORWARD(int, pthread_rwlock_rdlock, GLIBC_2.2.5, (pthread_rwlock_t* l), (l))
M3IDX_FORWARD(int, pthread_rwlock_wrlock, GLIBC_2.2.5, (pthread_rwlock_t* l), (l))
M3IDX_FORWARD(int, pthread_rwlock_unlock, GLIBC_2.2.5, (pthread_rwlock_t* l), (l))
M3IDX_FORWARD(int, pthread_getname_np, GLIBC_2.12, (pthread_t t, char* n, size_t len), (t, n, len))
M3IDX_FORWARD(int, pthread_setname_np, GLIBC_2.12, (pthread_t t, const char* n), (t, n))
/* GoogleTest's thread-local storage and libstdc++'s condition_variable.o (pulled in by LLVM's ORC
   JIT): the GPU test bundle's executable (scripts/package --tests). */
M3IDX_FORWARD(int, pthread_key_create, GLIBC_2.2.5, (pthread_key_t* k, void (*d)(void*)), (k, d))
M3IDX_FORWARD(int, pthread_key_delete, GLIBC_2.2.5, (pthread_key_t k), (k))
M3IDX_FORWARD(void*, pthread_getspecific, GLIBC_2.2.5, (pthread_key_t k), (k))
M3IDX_FORWARD(int, pthread_setspecific, GLIBC_2.2.5, (pthread_key_t k, const void* v), (k, v))

/* libdl's functions before 2.34. dlopen and dlsym look at their caller to resolve $ORIGIN and
   RTLD_NEXT: the caller is still this library. */
M3IDX_FORWARD(void*, dlopen, GLIBC_2.2.5, (const char* f, int flags), (f, flags))
M3IDX_FORWARD(void*, dlsym, GLIBC_2.2.5, (void* h, const char* s), (h, s))
M3IDX_FORWARD(int, dlclose, GLIBC_2.2.5, (void* h), (h))
M3IDX_FORWARD(char*, dlerror, GLIBC_2.2.5, (void), ())
M3IDX_FORWARD(int, dladdr, GLIBC_2.2.5, (const void* a, Dl_info* i), (a, i))

/* libstdc++ skips atomic reference counts while this byte says the process has one thread
   (2.32). Zero, "maybe several threads", is always correct. */
M3IDX_HIDDEN char __wrap___libc_single_threaded = 0;

/* arc4random (2.36), std::random_device's source: getrandom (2.25), /dev/urandom where the
   kernel lacks it. Like glibc's, it never fails: with no entropy source at all it aborts. */
M3IDX_HIDDEN uint32_t __wrap_arc4random(void) {
  uint32_t value;
  size_t got = 0;
  while (got < sizeof value) {
    ssize_t n = getrandom((char*)&value + got, sizeof value - got, 0);
    if (n > 0) got += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  if (got == sizeof value) return value;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  got = 0;
  while (fd >= 0 && got < sizeof value) {
    ssize_t n = read(fd, (char*)&value + got, sizeof value - got);
    if (n > 0) got += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  if (fd >= 0) close(fd);
  if (got != sizeof value) abort();
  return value;
}

/* _dl_find_object (2.35): GCC 12's static unwinder asks it for the unwind table (eh_frame_hdr)
   of the object holding a return address, and has no other path, so every throw goes through
   it. Over dl_iterate_phdr (2.2.5): the loaded object whose PT_LOAD segment holds the address.
   dlfo_link_map is left null: the unwinder reads only the map bounds and dlfo_eh_frame. */
struct FindObject {
  uintptr_t address;
  struct dl_find_object* result;
};
static int findObjectIn(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct FindObject* find = data;
  uintptr_t lowest = UINTPTR_MAX, highest = 0;
  int holds = 0;
  void* ehFrame = NULL;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD) {
      if (start < lowest) lowest = start;
      if (start + ph->p_memsz > highest) highest = start + ph->p_memsz;
      if (find->address >= start && find->address < start + ph->p_memsz) holds = 1;
    } else if (ph->p_type == PT_GNU_EH_FRAME) {
      ehFrame = (void*)start;
    }
  }
  if (!holds) return 0;
  memset(find->result, 0, sizeof *find->result);
  find->result->dlfo_map_start = (void*)lowest;
  find->result->dlfo_map_end = (void*)highest;
  find->result->dlfo_eh_frame = ehFrame;
  return 1;
}
M3IDX_HIDDEN int __wrap__dl_find_object(void* address, struct dl_find_object* result) {
  struct FindObject find = {(uintptr_t)address, result};
  return dl_iterate_phdr(findObjectIn, &find) ? 0 : -1;
}
