// The host kernel store: one kernel per (kind, whole config) in memory -- configs that differ in
// any field are different kernels (the memory key once held only heads and rows, so two token
// tiles shared one kernel) -- and a fresh store finds what another compiled in the disk cache.
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/KernelStore.h"
#include "tuning/TargetTuning.h"

using namespace m3idx;
namespace fs = std::filesystem;

namespace {

struct FreshCache {
  std::string dir = (fs::temp_directory_path() / ("m3idx_store_" + std::to_string(::getpid()))).string();
  FreshCache() {
    fs::remove_all(dir);
    ::setenv("M3IDX_CACHE_DIR", dir.c_str(), 1);
  }
  ~FreshCache() {
    fs::remove_all(dir);
    ::unsetenv("M3IDX_CACHE_DIR");
  }
};

} // namespace

TEST(KernelStore, ConfigsDifferingInAnyFieldAreDifferentKernels) {
  FreshCache cache;
  runtime::KernelStore store;
  kernels::KernelConfig a = tuning::hostTuning().configFor(kernels::KernelKind::ScorePrefill, 1, 4), b = a;
  b.tokenTile = 32; // same heads and rows
  auto ka = store.get(kernels::KernelKind::ScorePrefill, a), kb = store.get(kernels::KernelKind::ScorePrefill, b);
  ASSERT_TRUE(ka.ok()) << ka.status().message();
  ASSERT_TRUE(kb.ok()) << kb.status().message();
  EXPECT_NE(ka->code, kb->code);
  ASSERT_EQ(store.records().size(), 2u);
  EXPECT_EQ(store.records()[1].config, b.str());
  auto again = store.get(kernels::KernelKind::ScorePrefill, a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->code, ka->code); // from memory: no new record
  EXPECT_EQ(again->signature, ka->signature);
  EXPECT_EQ(store.records().size(), 2u);
  // Each field the config's code depends on, changed alone, is another kernel (the memory lookup
  // once compared only heads, rows, token tile, warps and folding: a config differing in its
  // unroll hint, mask form, row tile or tiles ahead got the first one's code).
  const kernels::KernelConfig d = tuning::hostTuning().configFor(kernels::KernelKind::ScoreDecode, 4, 8);
  std::vector<kernels::KernelConfig> variants(4, d);
  variants[0].blockUnroll = d.blockUnroll + 1;
  variants[1].narrowMask = !d.narrowMask;
  variants[2].rowTile = 4;
  variants[3].tilesAhead = d.tilesAhead + 1;
  auto base = store.get(kernels::KernelKind::ScoreDecode, d);
  ASSERT_TRUE(base.ok()) << base.status().message();
  for (const kernels::KernelConfig &v : variants) {
    auto kv = store.get(kernels::KernelKind::ScoreDecode, v);
    ASSERT_TRUE(kv.ok()) << v.str() << ": " << kv.status().message();
    EXPECT_NE(kv->code, base->code) << v.str();
  }
  EXPECT_EQ(store.records().size(), 2u + 1u + variants.size());
}

TEST(KernelStore, AFreshStoreReadsWhatAnotherCompiled) {
  FreshCache cache;
  const kernels::KernelConfig c = tuning::hostTuning().configFor(kernels::KernelKind::TopkPrefill, 1, 4);
  {
    runtime::KernelStore first;
    ASSERT_TRUE(first.get(kernels::KernelKind::TopkPrefill, c).ok());
    EXPECT_EQ(first.records().at(0).source, runtime::KernelSource::Compiled);
  }
  runtime::KernelStore second;
  ASSERT_TRUE(second.get(kernels::KernelKind::TopkPrefill, c).ok());
  EXPECT_EQ(second.records().at(0).source, runtime::KernelSource::DiskCache);
  EXPECT_EQ(second.records()[0].key.size(), 64u); // BLAKE3, hex
}
