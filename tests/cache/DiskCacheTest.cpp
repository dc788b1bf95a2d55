// The disk cache and the kernel store on it: atomic writes, corruption as a miss with a warning and
// a correct result after, an unwritable folder, RUN_ONLY, and AOT bundles with the compiler off.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cache/DiskCache.h"
#include "casefile/CaseGenerator.h"
#include "core/AtomicFile.h"
#include "reference/ReferenceIndexer.h"
#include "runtime/AotBundle.h"
#include "runtime/HostBackend.h"

using namespace m3idx;
namespace fs = std::filesystem;

namespace {

std::string freshDir(const std::string &name) {
  fs::path dir = fs::temp_directory_path() / ("m3idx_cache_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

Case smallCase() {
  GenOptions o;
  o.seed = 21;
  o.numHeads = 1;
  o.numDecodes = 2;
  o.numPrefills = 0;
  o.decodeContext = {100, 700};
  return *generateCase(o);
}

// Runs the case on a fresh backend (fresh in-memory store) against the cache in M3IDX_CACHE_DIR.
std::vector<runtime::KernelSource> runFresh(const Case &c, std::vector<int32_t> *topk = nullptr) {
  runtime::HostBackend host;
  StatusOr<IndexerOutput> out = host.run(c.view(), {});
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (topk && out.ok())
    *topk = out->topk;
  std::vector<runtime::KernelSource> sources;
  for (const auto &r : host.kernelRecords())
    sources.push_back(r.source);
  return sources;
}

using runtime::KernelSource;
const std::vector<KernelSource> kCompiledTwice = {KernelSource::Compiled, KernelSource::Compiled};
const std::vector<KernelSource> kFromDisk = {KernelSource::DiskCache, KernelSource::DiskCache};

} // namespace

TEST(AtomicWrite, FailureLeavesNoEntryAndNoTempFile) {
  const std::string dir = freshDir("atomic");
  const fs::path target = fs::path(dir) / "entry";
  fs::create_directories(target / "occupied"); // rename onto a non-empty folder fails
  Status s = writeFileAtomically(target.string(), "payload");
  ASSERT_FALSE(s.ok());
  size_t files = 0;
  for (const auto &f : fs::directory_iterator(dir))
    files += f.path().filename() != "entry";
  EXPECT_EQ(files, 0u) << "a temporary file was left behind";
}

// A writer killed before its rename leaves "<entry>.tmpXXXXXX": never listed as an entry (cache
// verify passed over it before: tests/cli/kill_writers.sh found one), removed by prune once stale.
TEST(DiskCacheStore, AKilledWritersTemporaryIsNoEntryAndPruneRemovesIt) {
  const std::string dir = freshDir("killed");
  cache::DiskCache disk(dir);
  const std::string temp = disk.entryPath("abc") + ".tmpQ1w2E3", fresh = disk.entryPath("def") + ".tmpR4t5Y6";
  std::ofstream(temp) << "half an entry";
  std::ofstream(fresh) << "a write in progress";
  EXPECT_TRUE(isUnfinishedWrite(fs::path(temp).filename().string()));
  EXPECT_FALSE(isUnfinishedWrite("llvmcache-abc"));
  EXPECT_TRUE(disk.list().empty());
  fs::last_write_time(temp, fs::file_time_type::clock::now() - std::chrono::hours(2));
  ASSERT_TRUE(disk.prune("cache_size_bytes=1g", /*force=*/true).ok());
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_TRUE(fs::exists(fresh)); // another process may be writing it now
}

TEST(DiskCacheStore, SecondProcessReadsWhatTheFirstCompiled) {
  ::setenv("M3IDX_CACHE_DIR", freshDir("hit").c_str(), 1);
  Case c = smallCase();
  std::vector<int32_t> first, second;
  EXPECT_EQ(runFresh(c, &first), kCompiledTwice);
  EXPECT_EQ(runFresh(c, &second), kFromDisk);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first, reference::runReference(c.view(), false)->topk);
}

TEST(DiskCacheStore, CorruptEntriesAreMissesWithAWarningAndACorrectResult) {
  const std::string dir = freshDir("corrupt");
  ::setenv("M3IDX_CACHE_DIR", dir.c_str(), 1);
  Case c = smallCase();
  const std::vector<int32_t> want = reference::runReference(c.view(), false)->topk;
  runFresh(c);
  cache::DiskCache disk(cache::defaultCacheDirectory());
  auto damage = [&](const std::function<void(const fs::path &)> &fn) {
    for (const auto &l : disk.list())
      fn(l.path);
  };
  const std::vector<std::pair<std::string, std::function<void(const fs::path &)>>> defects = {
      {"truncate", [](const fs::path &p) { fs::resize_file(p, fs::file_size(p) / 2); }},
      {"flip a byte",
       [](const fs::path &p) {
         std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(static_cast<std::streamoff>(fs::file_size(p) / 2));
         char x = 0x5A;
         f.write(&x, 1);
       }},
      {"wrong version",
       [](const fs::path &p) {
         std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(8);
         char v = 7;
         f.write(&v, 1);
       }},
      {"zero length", [](const fs::path &p) { fs::resize_file(p, 0); }},
      {"directory in place of a file",
       [](const fs::path &p) {
         fs::remove(p);
         fs::create_directories(p / "x");
       }},
  };
  for (const auto &[name, defect] : defects) {
    damage(defect);
    ::testing::internal::CaptureStderr();
    std::vector<int32_t> got;
    EXPECT_EQ(runFresh(c, &got), kCompiledTwice) << name;
    std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("is unusable"), std::string::npos) << name << ": " << log;
    EXPECT_EQ(got, want) << name;
    EXPECT_EQ(runFresh(c), kFromDisk) << name << ": the recompiled entry was not stored";
  }
}

TEST(DiskCacheStore, UnwritableFolderWarnsOnceAndKeepsWorking) {
  const std::string dir = freshDir("unwritable");
  const std::string file = (fs::path(dir) / "a-file").string();
  std::ofstream(file) << "x";
  ::setenv("M3IDX_CACHE_DIR", (fs::path(file) / "cache").c_str(), 1); // under a regular file
  ::testing::internal::CaptureStderr();
  std::vector<int32_t> got;
  EXPECT_EQ(runFresh(smallCase(), &got), kCompiledTwice);
  EXPECT_EQ(runFresh(smallCase()), kCompiledTwice);
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("is not writable"), std::string::npos) << log;
  EXPECT_EQ(log.find("is not writable"), log.rfind("is not writable")) << "warned more than once";
  EXPECT_EQ(got, reference::runReference(smallCase().view(), false)->topk);
}

TEST(DiskCacheStore, RunOnlyMissNamesKernelAndConfig) {
  ::setenv("M3IDX_CACHE_DIR", freshDir("runonly").c_str(), 1);
  ::setenv("M3IDX_RUN_ONLY", "1", 1);
  runtime::HostBackend host;
  StatusOr<IndexerOutput> out = host.run(smallCase().view(), {});
  ::unsetenv("M3IDX_RUN_ONLY");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("kernel score_decode (heads=1,rows=4,unroll=4)"), std::string::npos)
      << out.status().message();
  EXPECT_NE(out.status().message().find("M3IDX_RUN_ONLY=1"), std::string::npos);
}

TEST(DiskCacheStore, AlwaysCompileBypassesReads) {
  ::setenv("M3IDX_CACHE_DIR", freshDir("always").c_str(), 1);
  runFresh(smallCase());
  ::setenv("M3IDX_ALWAYS_COMPILE", "1", 1);
  EXPECT_EQ(runFresh(smallCase()), kCompiledTwice);
  ::unsetenv("M3IDX_ALWAYS_COMPILE");
}

TEST(AotBundle, ServesKernelsWithTheCompilerDisabled) {
  const std::string bundle = freshDir("bundle");
  runtime::BundleRequest req;
  req.out = bundle;
  req.heads = {1};
  req.decodeQueryLens = {4};
  auto items = runtime::compileBundle(req, nullptr);
  ASSERT_TRUE(items.ok()) << items.status().message();
  // score and top-k, decode and prefill, the prefill score's fused and key-image forms, decode_keys
  EXPECT_EQ(items->size(), 7u);
  EXPECT_TRUE(fs::exists(fs::path(bundle) / "manifest.json"));

  ::setenv("M3IDX_CACHE_DIR", freshDir("bundle-cache").c_str(), 1);
  ::setenv("M3IDX_DISABLE_COMPILER", "1", 1);
  // The switch is real: with no bundle, the run fails for want of a compiler.
  {
    runtime::HostBackend host;
    StatusOr<IndexerOutput> out = host.run(smallCase().view(), {});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("compiler is disabled"), std::string::npos);
  }
  ::setenv("M3IDX_AOT_PATH", ("/nonexistent:" + bundle).c_str(), 1);
  std::vector<int32_t> got;
  EXPECT_EQ(runFresh(smallCase(), &got),
            (std::vector<KernelSource>{KernelSource::AotBundle, KernelSource::AotBundle}));
  ::unsetenv("M3IDX_DISABLE_COMPILER");
  ::unsetenv("M3IDX_AOT_PATH");
  EXPECT_EQ(got, reference::runReference(smallCase().view(), false)->topk);
}

TEST(AotBundle, RejectsUnknownTargets) {
  runtime::BundleRequest req;
  req.out = freshDir("bundle-gpu");
  req.targets = {"host", "sm_80"};
  auto items = runtime::compileBundle(req, nullptr);
  ASSERT_FALSE(items.ok());
  EXPECT_NE(items.status().message().find("--target"), std::string::npos);
  EXPECT_NE(items.status().message().find("sm_80"), std::string::npos);
}
