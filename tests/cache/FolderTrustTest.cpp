// Whose code runs: a new cache folder is private (0700) whatever the umask; a cache folder, cache
// entry, AOT bundle folder or bundle entry that another user could have written is refused with
// one error naming it and its mode or owner, unless M3IDX_TRUST_SHARED_CACHE=1.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/DiskCache.h"
#include "cache/FolderTrust.h"
#include "cache/BundleReader.h"
#include "runtime/CacheOrCompile.h"

using namespace m3idx;
namespace fs = std::filesystem;

namespace {

std::string freshDir(const std::string &name) {
  fs::path dir = fs::temp_directory_path() / ("m3idx_trust_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir.string();
}

mode_t modeOf(const std::string &path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Unsets M3IDX_TRUST_SHARED_CACHE for a test and restores it after.
class FolderTrust : public ::testing::Test {
protected:
  void SetUp() override { ::unsetenv("M3IDX_TRUST_SHARED_CACHE"); }
  void TearDown() override { ::unsetenv("M3IDX_TRUST_SHARED_CACHE"); }
};

TEST_F(FolderTrust, NewCacheFoldersArePrivateWhateverTheUmask) {
  const std::string base = freshDir("new");
  const mode_t old = ::umask(0);
  cache::DiskCache disk((fs::path(base) / "v1").string());
  ::umask(old);
  EXPECT_TRUE(disk.trust().ok()) << disk.trust().message();
  EXPECT_TRUE(disk.usable());
  EXPECT_EQ(modeOf(base), 0700u);
  EXPECT_EQ(modeOf((fs::path(base) / "v1").string()), 0700u);
  fs::remove_all(base);
}

TEST_F(FolderTrust, AFolderOthersCanWriteIsRefusedUnlessTrusted) {
  for (const char *which : {"base", "v1"}) {
    const std::string base = freshDir(which), dir = (fs::path(base) / "v1").string();
    fs::create_directories(dir);
    const std::string loose = std::string(which) == "base" ? base : dir;
    ::chmod(loose.c_str(), 0777);
    cache::DiskCache disk(dir);
    ASSERT_FALSE(disk.trust().ok()) << which;
    EXPECT_NE(disk.trust().message().find("kernel cache folder " + loose + " is writable by others (mode 0777)"),
              std::string::npos)
        << disk.trust().message();
    EXPECT_FALSE(disk.usable());
    StatusOr<runtime::CachedEntry> got = runtime::cacheOrCompile(disk, "k", "kernel x", "the cache", [] {
      return StatusOr<cache::Entry>(Status::error("must not compile into a refused cache"));
    });
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.status().message().find("M3IDX_TRUST_SHARED_CACHE=1"), std::string::npos);
    ::setenv("M3IDX_TRUST_SHARED_CACHE", "1", 1);
    EXPECT_TRUE(cache::DiskCache(dir).trust().ok());
    ::unsetenv("M3IDX_TRUST_SHARED_CACHE");
    ::chmod(loose.c_str(), 0775);
    EXPECT_NE(cache::DiskCache(dir).trust().message().find("is writable by its group (mode 0775)"),
              std::string::npos);
    fs::remove_all(base);
  }
}

TEST_F(FolderTrust, AStickyRootFolderMayHoldACacheFolder) {
  const std::string dir = freshDir("sticky");
  EXPECT_TRUE(cache::checkTrustedParent(fs::temp_directory_path().string(), "folder").ok()); // /tmp: 1777, root
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 01777);
  EXPECT_FALSE(cache::checkTrusted(dir, "folder").ok()); // others may add entries to the cache itself
  if (::geteuid() == 0) { // ours is root's here: sticky and root-owned, a fine parent
    EXPECT_TRUE(cache::checkTrustedParent(dir, "folder").ok());
  }
  fs::remove_all(dir);
}

TEST_F(FolderTrust, AnEntryOthersCanWriteIsRefusedNotRemoved) {
  const std::string dir = (fs::path(freshDir("entry")) / "v1").string();
  cache::DiskCache disk(dir);
  const std::string entry = disk.entryPath("abc");
  std::ofstream(entry) << "anything";
  ::chmod(entry.c_str(), 0666);
  EXPECT_FALSE(disk.read("abc").has_value());
  ASSERT_FALSE(disk.trust().ok());
  EXPECT_NE(disk.trust().message().find("kernel cache entry " + entry + " is writable by others"),
            std::string::npos)
      << disk.trust().message();
  EXPECT_TRUE(fs::exists(entry)); // not ours to delete
  fs::remove_all(fs::path(dir).parent_path());
}

TEST_F(FolderTrust, AnotherUsersFolderIsRefusedNamingTheOwner) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to give a folder to another user (chown)";
  const std::string dir = freshDir("owner");
  fs::create_directories(dir);
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  Status s = cache::checkTrusted(dir, "AOT bundle folder");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("AOT bundle folder " + dir + " is owned by"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("uid 65534"), std::string::npos) << s.message();
  fs::remove_all(dir);
}

TEST_F(FolderTrust, AnAotBundleOthersCanWriteIsAnError) {
  const std::string bundle = freshDir("bundle");
  fs::create_directories(bundle);
  std::ofstream(fs::path(bundle) / "llvmcache-k") << "anything";
  ::setenv("M3IDX_AOT_PATH", bundle.c_str(), 1);
  std::string unusable;
  ::chmod(bundle.c_str(), 0777);
  auto found = cache::findInBundles("llvmcache-k", "k", unusable);
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("AOT bundle folder " + bundle + " is writable by others"),
            std::string::npos)
      << found.status().message();
  ::chmod(bundle.c_str(), 0755);
  ::chmod((fs::path(bundle) / "llvmcache-k").c_str(), 0622);
  found = cache::findInBundles("llvmcache-k", "k", unusable);
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("AOT bundle entry"), std::string::npos) << found.status().message();
  ::unsetenv("M3IDX_AOT_PATH");
  fs::remove_all(bundle);
}

} // namespace
