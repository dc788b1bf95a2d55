// cacheOrCompile, the cache half of obtaining any kernel: compile once and store, read back after;
// M3IDX_RUN_ONLY refuses a miss naming the kernel, where it looked and the key; M3IDX_ALWAYS_COMPILE
// compiles again; a compile error reaches the caller and stores nothing.
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/CacheOrCompile.h"

using namespace m3idx;
namespace fs = std::filesystem;

namespace {

struct CountingCompile {
  int calls = 0;
  std::function<StatusOr<cache::Entry>()> fn(const std::string &key) {
    return [this, key]() -> StatusOr<cache::Entry> {
      ++calls;
      cache::Entry e;
      e.key = key;
      e.kernel = "k";
      e.binary = {1, 2, 3};
      return e;
    };
  }
};

std::string freshDir(const std::string &name) {
  const fs::path d = fs::temp_directory_path() / ("m3idx_coc_" + std::to_string(::getpid()) + "_" + name) / "v1";
  fs::remove_all(d.parent_path());
  return d.string();
}

} // namespace

TEST(CacheOrCompile, CompilesOnceThenReads) {
  cache::DiskCache disk(freshDir("once"));
  CountingCompile compile;
  auto first = runtime::cacheOrCompile(disk, "key1", "kernel k", "the cache", compile.fn("key1"));
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(first->compiled);
  auto second = runtime::cacheOrCompile(disk, "key1", "kernel k", "the cache", compile.fn("key1"));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->compiled);
  EXPECT_EQ(second->entry.binary, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(compile.calls, 1);
  ::setenv("M3IDX_ALWAYS_COMPILE", "1", 1);
  auto forced = runtime::cacheOrCompile(disk, "key1", "kernel k", "the cache", compile.fn("key1"));
  ::unsetenv("M3IDX_ALWAYS_COMPILE");
  ASSERT_TRUE(forced.ok());
  EXPECT_TRUE(forced->compiled);
  EXPECT_EQ(compile.calls, 2);
}

TEST(CacheOrCompile, RunOnlyRefusesAMissNamingIt) {
  cache::DiskCache disk(freshDir("runonly"));
  CountingCompile compile;
  ::setenv("M3IDX_RUN_ONLY", "1", 1);
  auto got = runtime::cacheOrCompile(disk, "key2", "kernel k (heads=1)", "the cache D", compile.fn("key2"));
  ::unsetenv("M3IDX_RUN_ONLY");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(),
            "kernel k (heads=1) is not in the cache D, and M3IDX_RUN_ONLY=1 forbids compiling it (key key2)");
  EXPECT_EQ(compile.calls, 0);
}

TEST(CacheOrCompile, ACompileErrorReachesTheCallerAndStoresNothing) {
  cache::DiskCache disk(freshDir("error"));
  auto failing = [] { return StatusOr<cache::Entry>(Status::error("lowering failed at line 3")); };
  auto got = runtime::cacheOrCompile(disk, "key3", "kernel k", "the cache", failing);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "lowering failed at line 3");
  EXPECT_FALSE(disk.read("key3").has_value());
}
