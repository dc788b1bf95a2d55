#include "cache/CacheKey.h"
#include "cache/DiskCache.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "cache/FolderTrust.h"
#include "core/AtomicFile.h"
#include "core/EnvTable.h"
#include "llvm/Support/CachePruning.h"
#include "llvm/Support/Error.h"

namespace m3idx::cache {

namespace fs = std::filesystem;

namespace {

constexpr const char *kPrefix = "llvmcache-";

void warnOnce(const std::string &message) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mutex);
  if (seen.insert(message).second)
    std::cerr << "m3idx: warning: " << message << "\n";
}

std::optional<std::string> readFile(const std::string &path, std::string &problem) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return std::nullopt;
  if (!fs::is_regular_file(path, ec)) {
    problem = "not a regular file";
    return std::string();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    problem = "unreadable";
    return std::string();
  }
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

} // namespace

std::string defaultCacheDirectory() {
  std::string base = env::get("M3IDX_CACHE_DIR");
  if (base.empty()) {
    const char *xdg = std::getenv("XDG_CACHE_HOME"); // not m3idx's: read directly
    const char *home = std::getenv("HOME");
    base = xdg && *xdg ? fs::path(xdg) / "m3idx"
           : home      ? fs::path(home) / ".cache" / "m3idx"
                       : fs::path("/tmp") / "m3idx-cache";
  }
  return (fs::path(base) / fmt::format("v{}", kFormatVersion)).string();
}

DiskCache::DiskCache(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  if (Status made = createPrivateFolders((fs::path(dir_) / "locks").string()); !made.ok())
    ec = std::make_error_code(std::errc::permission_denied);
  // The folder and the one above it (M3IDX_CACHE_DIR; whoever can write it can replace ours).
  trust_ = checkTrustedParent(fs::path(dir_).parent_path().string(), "kernel cache folder");
  if (trust_.ok())
    trust_ = checkTrusted(dir_, "kernel cache folder");
  if (!trust_.ok())
    return; // not usable, and read() finds nothing
  const std::string probe = (fs::path(dir_) / ".m3idx-write-probe").string();
  if (!ec) {
    int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
      usable_ = true;
      return;
    }
    ec = std::error_code(errno, std::generic_category());
  }
  warnOnce(fmt::format("kernel cache folder {} is not writable ({}); kernels stay in memory for "
                       "this process",
                       dir_, ec.message()));
}

std::string DiskCache::entryPath(const std::string &key) const {
  return (fs::path(dir_) / (kPrefix + key)).string();
}

std::optional<Entry> DiskCache::read(const std::string &key, std::string *unusable) {
  const std::string path = entryPath(key);
  if (!trust_.ok())
    return std::nullopt;
  if (Status s = checkTrusted(path, "kernel cache entry"); !s.ok()) {
    trust_ = s; // the caller's error names it; another user's file is not ours to remove
    return std::nullopt;
  }
  std::string problem;
  std::optional<std::string> bytes = readFile(path, problem);
  if (!bytes)
    return std::nullopt;
  if (problem.empty()) {
    StatusOr<Entry> e = decodeEntry(*bytes, path);
    if (e.ok() && e->key == key) {
      ::utimes(path.c_str(), nullptr); // a hit keeps the entry young for pruning
      return std::move(e).value();
    }
    problem = e.ok() ? "an entry for another key" : e.status().message();
  }
  std::error_code ec;
  fs::remove_all(path, ec);
  if (unusable) {
    *unusable += fmt::format("{}kernel cache entry {} is unusable ({}); removed", unusable->empty() ? "" : "; ",
                             path, problem);
    return std::nullopt;
  }
  // Every time: each bad entry found is a separate event worth seeing.
  std::cerr << fmt::format("m3idx: warning: kernel cache entry {} is unusable ({}); removed, "
                           "recompiling\n",
                           path, problem);
  return std::nullopt;
}

Status DiskCache::write(const Entry &entry) {
  if (!usable_)
    return Status();
  const std::string path = entryPath(entry.key);
  std::error_code ec;
  if (fs::is_directory(path, ec))
    fs::remove_all(path, ec);
  Status s = writeFileAtomically(path, encodeEntry(entry));
  if (!s.ok())
    warnOnce("kernel cache write failed: " + s.message());
  return s;
}

DiskCache::KeyLock::~KeyLock() {
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
}

StatusOr<std::unique_ptr<DiskCache::KeyLock>> DiskCache::lock(const std::string &key,
                                                               double timeoutSeconds) {
  const std::string path = (fs::path(dir_) / "locks" / (key + ".lock")).string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return invalidArgument(path, "a lock file that can be opened", std::strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeoutSeconds * 1000));
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      std::string err = std::strerror(errno);
      ::close(fd);
      return invalidArgument(path, "a lock", err);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::close(fd);
      return Status::error(fmt::format("{}: another process held the lock for more than {} s "
                                       "(M3IDX_CACHE_LOCK_TIMEOUT_S)",
                                       path, timeoutSeconds));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::make_unique<KeyLock>(fd);
}

Status DiskCache::prune(const std::string &policyText, bool force) {
  if (!usable_)
    return Status();
  auto policy = llvm::parseCachePruningPolicy(policyText);
  if (!policy)
    return invalidArgument("M3IDX_CACHE_POLICY", "an LLVM cache pruning policy",
                           fmt::format("'{}' ({})", policyText, llvm::toString(policy.takeError())));
  if (force)
    policy->Interval = std::chrono::seconds(0);
  // A killed writer's temporary: older than any live write takes.
  const auto stale = fs::file_time_type::clock::now() - std::chrono::hours(1);
  std::error_code ec;
  for (const auto &item : fs::directory_iterator(dir_, ec)) {
    std::error_code ignored;
    if (isUnfinishedWrite(item.path().filename().string()) && fs::last_write_time(item.path(), ignored) < stale)
      fs::remove(item.path(), ignored);
  }
  llvm::pruneCache(dir_, *policy);
  return Status();
}

std::vector<DiskCache::Listing> DiskCache::list() const {
  std::vector<Listing> out;
  std::error_code ec;
  for (const auto &item : fs::directory_iterator(dir_, ec)) {
    const std::string name = item.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || isUnfinishedWrite(name)) // never read; prune removes them
      continue;
    Listing l;
    l.path = item.path().string();
    struct stat st;
    if (::stat(l.path.c_str(), &st) == 0) {
      l.bytes = static_cast<uint64_t>(st.st_size);
      l.modifiedUnix = st.st_mtime;
    }
    std::optional<std::string> bytes = readFile(l.path, l.problem);
    if (bytes && l.problem.empty()) {
      StatusOr<Entry> e = decodeEntry(*bytes, l.path);
      if (!e.ok())
        l.problem = e.status().message();
      else if (name != kPrefix + e->key)
        l.problem = "file name does not match its key";
      else {
        e->binary.clear();
        l.entry = std::move(e).value();
      }
    }
    out.push_back(std::move(l));
  }
  std::sort(out.begin(), out.end(), [](const Listing &a, const Listing &b) { return a.path < b.path; });
  return out;
}

Status DiskCache::clear() {
  std::error_code ec;
  for (const auto &item : fs::directory_iterator(dir_, ec)) {
    const std::string name = item.path().filename().string();
    if (name.rfind(kPrefix, 0) == 0 || name == "locks") // temporaries included
      fs::remove_all(item.path(), ec);
  }
  fs::create_directories(fs::path(dir_) / "locks", ec);
  return Status();
}

} // namespace m3idx::cache
