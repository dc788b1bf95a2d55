// The on-disk kernel cache: one file per entry (EntryFile format), written atomically, guarded by
// a per-key inter-process lock, bounded with LLVM's cache pruning policy. A bad entry is a miss
// (warned about and removed); an unusable folder makes the cache a no-op with one warning.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/EntryFile.h"
#include "core/Status.h"

namespace m3idx::cache {

// M3IDX_CACHE_DIR, else $XDG_CACHE_HOME/m3idx, else ~/.cache/m3idx; then "v<format version>".
std::string defaultCacheDirectory();

class DiskCache {
public:
  // Creates the folder (mode 0700); unusable -> warns once. A folder or entry another user could
  // have written is refused (cache/FolderTrust.h): trust() says why, and nothing is read or written.
  explicit DiskCache(std::string dir);
  const std::string &dir() const { return dir_; }
  bool usable() const { return usable_; }
  const Status &trust() const { return trust_; }

  // Files are named llvmcache-<key> so LLVM's pruneCache manages them.
  std::string entryPath(const std::string &key) const;

  // nullopt on a miss. A defective entry is reported, removed and treated as a miss.
  // With `unusable`, a bad entry is described there instead of warned about (the caller's error
  // will name it).
  std::optional<Entry> read(const std::string &key, std::string *unusable = nullptr);
  Status write(const Entry &entry);

  // Exclusive per-key lock across processes (flock); released when the object dies.
  class KeyLock {
  public:
    explicit KeyLock(int fd) : fd_(fd) {}
    ~KeyLock();
    KeyLock(const KeyLock &) = delete;
    KeyLock &operator=(const KeyLock &) = delete;

  private:
    int fd_;
  };
  StatusOr<std::unique_ptr<KeyLock>> lock(const std::string &key, double timeoutSeconds);

  // LLVM cache pruning policy, e.g. "cache_size_bytes=2g:prune_after=30d". `force` ignores the
  // policy's prune interval.
  Status prune(const std::string &policy, bool force);

  struct Listing {
    std::string path;
    uint64_t bytes = 0;
    int64_t modifiedUnix = 0;
    std::optional<Entry> entry; // header fields; binary left empty
    std::string problem;        // why it is unusable, if it is
  };
  std::vector<Listing> list() const;
  Status clear(); // removes every entry and lock file

private:
  Status trust_;
  std::string dir_;
  bool usable_ = false;
};

} // namespace m3idx::cache
