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
#include "tuning/TargetTuning.h"
#include "lowering/Target.h"
#include "runtime/AotBundle.h"
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
  const auto config = tuning::hostTuning().configFor(kind, 1, 4);
  for (auto make : {lowering::makeSm90Target, lowering::makeGfx950Target}) {
    runtime::CodeSource cached = runtime::cachedGpuCode(make);
    auto source = [&](kernels::KernelKind kind, const kernels::KernelConfig &config) -> StatusOr<std::string> {
      auto k = kernels::buildKernel(kind, config);
      return k.ok() ? cached(*k, config) : StatusOr<std::string>(k.status());
    };
    auto first = source(kind, config);
    ASSERT_TRUE(first.ok()) << first.status().message();
    ScopedEnv off("M3IDX_DISABLE_COMPILER", "1");
    auto again = source(kind, config);
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(*again, *first);
    auto miss = source(kernels::KernelKind::TopkPrefill, tuning::hostTuning().configFor(kernels::KernelKind::TopkPrefill, 1, 4));
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

// `m3idx compile --target sm_90,gfx950` bundles: with the bundle on M3IDX_AOT_PATH, an empty cache
// and the compiler disabled, both targets' code objects are served (PTX also to a runtime that
// would assemble cubins), equal to what a compile gives; without the bundle the same request fails.
TEST(GpuCodeCache, AotBundleServesGpuCodeWithTheCompilerDisabled) {
  const auto base = std::filesystem::temp_directory_path() / ("m3idx-gpu-bundle-" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  runtime::BundleRequest req;
  req.out = (base / "bundle").string();
  req.targets = {"sm_90", "gfx950"};
  req.heads = {1};
  auto items = runtime::compileBundle(req, nullptr);
  ASSERT_TRUE(items.ok()) << items.status().message();
  // each kernel's config on both targets, and sm_90's small-step score_decode and score_prefill
  // that tops its tiles' rows or reads the key image (configsFor: what its steps may launch)
  EXPECT_EQ(items->size(), 2 * kernels::allKernels().size() + 3);
  for (const runtime::BundleItem &it : *items)
    EXPECT_TRUE(it.error.empty()) << it.target << " " << it.kernel << ": " << it.error;

  ScopedEnv cacheDir("M3IDX_CACHE_DIR", (base / "cache").string());
  const auto kind = kernels::KernelKind::ScoreDecode;
  const auto config = tuning::hostTuning().configFor(kind, 1, 4);
  const dsl::Kernel kernel = *kernels::buildKernel(kind, config);
  for (auto make : {lowering::makeSm90Target, lowering::makeGfx950Target}) {
    auto compiled = runtime::cachedGpuCode(make)(kernel, config); // fills the cache: not used below
    ASSERT_TRUE(compiled.ok()) << compiled.status().message();
    std::filesystem::remove_all(base / "cache");
    ScopedEnv off("M3IDX_DISABLE_COMPILER", "1");
    auto without = runtime::cachedGpuCode(make)(kernel, config);
    ASSERT_FALSE(without.ok());
    EXPECT_NE(without.status().message().find("any AOT bundle"), std::string::npos)
        << without.status().message();
    ScopedEnv path("M3IDX_AOT_PATH", "/nonexistent:" + req.out);
    auto served = runtime::cachedGpuCode(make)(kernel, config);
    ASSERT_TRUE(served.ok()) << served.status().message();
    EXPECT_EQ(*served, *compiled);
    auto withPtxas = runtime::cachedGpuCode(make, std::string("/nonexistent/ptxas"))(kernel, config);
    ASSERT_TRUE(withPtxas.ok()) << withPtxas.status().message();
    EXPECT_EQ(*withPtxas, *compiled);
  }
  std::filesystem::remove_all(base);
}
