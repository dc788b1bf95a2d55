// GPU code objects go through the disk cache: the first request compiles and writes an entry for
// its target, the next is served with the compiler disabled, and a miss with the compiler
// disabled is an error naming the kernel (no driver needed: the code source is tested alone).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include <unistd.h>

#include "cache/DiskCache.h"
#include "kernels_src/KernelCatalog.h"
#include "lowering/Target.h"
#include "runtime/GpuCodeCache.h"

using namespace m3idx;

namespace {
struct ScopedEnv {
  const char *name;
  ScopedEnv(const char *n, const std::string &v) : name(n) { ::setenv(n, v.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name); }
};
} // namespace

TEST(GpuCodeCache, SecondRequestIsACacheHit) {
  const auto dir = std::filesystem::temp_directory_path() / ("m3idx-gpu-cache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ScopedEnv cacheDir("M3IDX_CACHE_DIR", dir.string());
  const auto kind = kernels::KernelKind::TopkDecode;
  const auto config = kernels::configFor(kind, 1, 4);
  for (auto make : {lowering::makeSm90Target, lowering::makeGfx950Target}) {
    runtime::CodeSource source = runtime::cachedGpuCode(make);
    auto first = source(kind, config);
    ASSERT_TRUE(first.ok()) << first.status().message();
    ScopedEnv off("M3IDX_DISABLE_COMPILER", "1");
    auto again = source(kind, config);
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(*again, *first);
    auto miss = source(kernels::KernelKind::TopkPrefill, kernels::configFor(kernels::KernelKind::TopkPrefill, 1, 4));
    ASSERT_FALSE(miss.ok());
    EXPECT_NE(miss.status().message().find("topk_prefill"), std::string::npos) << miss.status().message();
  }
  cache::DiskCache disk(cache::defaultCacheDirectory());
  std::set<std::string> targets;
  for (const auto &l : disk.list())
    if (l.entry)
      targets.insert(l.entry->target);
  EXPECT_EQ(targets, (std::set<std::string>{"gfx950", "sm_90"}));
  std::filesystem::remove_all(dir);
}
