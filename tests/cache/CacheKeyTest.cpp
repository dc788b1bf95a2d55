// Key completeness (FlyDSL's test_jit_cache_key_completeness in role): changing any input that
// shapes code changes the key; a code-neutral environment variable does not.
#include <cstdlib>

#include <gtest/gtest.h>

#include "cache/CacheKey.h"
#include "kernels_src/KernelCatalog.h"
#include "runtime/KernelStore.h"

using namespace m3idx;

namespace {

cache::KeyInputs base() {
  return {"m3idx 0.1.0 (build abc); LLVM 22.1.8", "score_decode", "kernel @score_decode() {}",
          "heads=1,rows=4", "kind=host;arch=znver4;features=+avx2", "opt-level=3",
          "M3IDX_OPT_LEVEL=3;"};
}

std::string keyOf(kernels::KernelKind kind, kernels::KernelConfig config) {
  StatusOr<dsl::Kernel> k = kernels::buildKernel(kind, config);
  EXPECT_TRUE(k.ok());
  return cache::cacheKey(runtime::hostKeyInputs(*k, config));
}

} // namespace

TEST(CacheKey, EveryInputChangesTheKey) {
  const std::string k0 = cache::cacheKey(base());
  EXPECT_EQ(k0.size(), 64u);
  EXPECT_EQ(cache::cacheKey(base()), k0); // deterministic
  std::vector<std::string cache::KeyInputs::*> fields = {
      &cache::KeyInputs::toolchain, &cache::KeyInputs::kernel, &cache::KeyInputs::dsl,
      &cache::KeyInputs::config,    &cache::KeyInputs::target, &cache::KeyInputs::options,
      &cache::KeyInputs::environment};
  for (auto field : fields) {
    cache::KeyInputs in = base();
    in.*field += "x";
    EXPECT_NE(cache::cacheKey(in), k0);
  }
}

TEST(CacheKey, LengthPrefixingSeparatesFields) {
  cache::KeyInputs a = base(), b = base();
  a.kernel = "ab";
  a.dsl = "c";
  b.kernel = "a";
  b.dsl = "bc";
  EXPECT_NE(cache::cacheKey(a), cache::cacheKey(b));
}

TEST(CacheKey, HostKeysFollowKernelConfigAndCodeChangingEnvironment) {
  using kernels::KernelKind;
  const std::string k = keyOf(KernelKind::ScoreDecode, {1, 4});
  EXPECT_NE(keyOf(KernelKind::ScoreDecode, {2, 4}), k);   // config (and DSL text)
  EXPECT_NE(keyOf(KernelKind::ScoreDecode, {1, 3}), k);
  EXPECT_NE(keyOf(KernelKind::ScorePrefill, {1, 4}), k);  // kernel
  ::setenv("M3IDX_OPT_LEVEL", "2", 1);                    // changes code
  EXPECT_NE(keyOf(KernelKind::ScoreDecode, {1, 4}), k);
  ::unsetenv("M3IDX_OPT_LEVEL");
  EXPECT_EQ(keyOf(KernelKind::ScoreDecode, {1, 4}), k);
  for (const char *neutral : {"M3IDX_NUM_THREADS", "M3IDX_DUMP", "M3IDX_CACHE_DIR",
                              "M3IDX_RUN_ONLY", "M3IDX_AOT_PATH"}) {
    ::setenv(neutral, "1", 1);
    EXPECT_EQ(keyOf(KernelKind::ScoreDecode, {1, 4}), k) << neutral;
    ::unsetenv(neutral);
  }
}
