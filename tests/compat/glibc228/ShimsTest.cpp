// compat/glibc228/Shims.c against the glibc it stands in for: each wrapper called directly gives
// what this machine's (newer) glibc gives through the new symbol. In the developer build the
// plain names are glibc's own; in the shipped build (--wrap) they are the wrappers too, and these
// checks still hold.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

extern "C" {
int __wrap_stat(const char *, struct stat *);
int __wrap_lstat(const char *, struct stat *);
int __wrap_fstat(int, struct stat *);
struct mallinfo2 __wrap_mallinfo2(void);
uint32_t __wrap_arc4random(void);
int __wrap__dl_find_object(void *, struct dl_find_object *);
void *__wrap_dlopen(const char *, int);
void *__wrap_dlsym(void *, const char *);
double __wrap_exp(double);
double __wrap_pow(double, double);
extern char __wrap___libc_single_threaded;
int __wrap_pthread_key_create(pthread_key_t *, void (*)(void *));
int __wrap_pthread_key_delete(pthread_key_t);
void *__wrap_pthread_getspecific(pthread_key_t);
int __wrap_pthread_setspecific(pthread_key_t, const void *);
}

namespace {

TEST(Glibc228Shims, StatFamilyMatchesGlibc) {
  struct stat mine {}, theirs {};
  ASSERT_EQ(__wrap_stat("/proc/self/exe", &mine), 0);
  ASSERT_EQ(stat("/proc/self/exe", &theirs), 0);
  EXPECT_EQ(mine.st_ino, theirs.st_ino);
  EXPECT_EQ(mine.st_size, theirs.st_size);
  ASSERT_EQ(__wrap_lstat("/proc/self/exe", &mine), 0);
  EXPECT_TRUE(S_ISLNK(mine.st_mode)); // lstat, not stat: the link itself
  int fd = open("/proc/self/exe", O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(__wrap_fstat(fd, &mine), 0);
  close(fd);
  EXPECT_EQ(mine.st_ino, theirs.st_ino);
  errno = 0;
  EXPECT_EQ(__wrap_stat("/nonexistent/m3idx", &mine), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST(Glibc228Shims, ThreadKeysRoundTrip) { // GoogleTest's own thread-local storage in the GPU bundle
  pthread_key_t key;
  ASSERT_EQ(__wrap_pthread_key_create(&key, nullptr), 0);
  int value = 7;
  EXPECT_EQ(__wrap_pthread_getspecific(key), nullptr);
  ASSERT_EQ(__wrap_pthread_setspecific(key, &value), 0);
  EXPECT_EQ(__wrap_pthread_getspecific(key), &value);
  EXPECT_EQ(pthread_getspecific(key), &value); // the same key as glibc's own calls see
  EXPECT_EQ(__wrap_pthread_key_delete(key), 0);
}

TEST(Glibc228Shims, MallinfoSeesAllocations) {
  size_t before = __wrap_mallinfo2().uordblks;
  void *p = malloc(1 << 16);
  ASSERT_NE(p, nullptr);
  *static_cast<volatile char *>(p) = 1;
  struct mallinfo2 during = __wrap_mallinfo2();
  free(p);
  EXPECT_GE(during.uordblks + during.hblkhd, before + (1 << 16) - 4096);
}

TEST(Glibc228Shims, Arc4randomIsNotConstant) {
  std::set<uint32_t> seen;
  for (int i = 0; i < 64; ++i) seen.insert(__wrap_arc4random());
  EXPECT_GT(seen.size(), 60u);
}

TEST(Glibc228Shims, FindObjectMatchesGlibcs) {
  // The addresses the unwinder asks about: code in this executable and in libc.
  for (void *pc : {reinterpret_cast<void *>(&__wrap_arc4random), reinterpret_cast<void *>(&puts)}) {
    struct dl_find_object mine {}, theirs {};
    ASSERT_EQ(__wrap__dl_find_object(pc, &mine), 0);
    ASSERT_EQ(_dl_find_object(pc, &theirs), 0);
    EXPECT_EQ(mine.dlfo_eh_frame, theirs.dlfo_eh_frame);
    EXPECT_EQ(mine.dlfo_map_start, theirs.dlfo_map_start);
    EXPECT_LE(reinterpret_cast<uintptr_t>(mine.dlfo_map_start), reinterpret_cast<uintptr_t>(pc));
    EXPECT_GT(reinterpret_cast<uintptr_t>(mine.dlfo_map_end), reinterpret_cast<uintptr_t>(pc));
  }
  struct dl_find_object none {};
  EXPECT_EQ(__wrap__dl_find_object(nullptr, &none), -1);
}

TEST(Glibc228Shims, ExceptionsUnwindThroughTheLookup) {
  // In the shipped build every throw goes through __wrap__dl_find_object; here it shows a throw
  // across frames of this executable is caught.
  auto thrower = [](int depth, auto &self) -> int {
    if (depth == 0) throw std::runtime_error("deep");
    return self(depth - 1, self) + 1;
  };
  EXPECT_THROW(thrower(8, thrower), std::runtime_error);
}

TEST(Glibc228Shims, OldVersionsAreTheSameFunctions) {
  EXPECT_DOUBLE_EQ(__wrap_exp(1.0), 2.718281828459045);
  EXPECT_DOUBLE_EQ(__wrap_pow(2.0, 10.0), 1024.0);
  void *self = __wrap_dlopen(nullptr, RTLD_NOW);
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(__wrap_dlsym(self, "malloc"), dlsym(self, "malloc"));
  EXPECT_EQ(__wrap___libc_single_threaded, 0); // always "maybe threads": atomics stay on
}

} // namespace
