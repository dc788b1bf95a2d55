#include "runtime/CacheOrCompile.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cache/EntryFile.h"
#include "core/EnvTable.h"

namespace m3idx::runtime {

namespace fs = std::filesystem;

StatusOr<CachedEntry> cacheOrCompile(cache::DiskCache &disk, const std::string &key,
                                     const std::string &what, const std::string &searched,
                                     const std::function<StatusOr<cache::Entry>()> &compile,
                                     std::string unusable) {
  const bool read = !env::flag("M3IDX_ALWAYS_COMPILE"), runOnly = env::flag("M3IDX_RUN_ONLY");
  M3IDX_RETURN_IF_ERROR(disk.trust());
  if (read)
    if (std::optional<cache::Entry> e = disk.read(key, runOnly ? &unusable : nullptr))
      return CachedEntry{std::move(*e), false};
  M3IDX_RETURN_IF_ERROR(disk.trust()); // the entry itself may have been refused
  if (runOnly)
    return Status::error(fmt::format("{} is not in {}{}, and M3IDX_RUN_ONLY=1 forbids compiling it "
                                     "(key {})",
                                     what, searched, unusable.empty() ? "" : " (" + unusable + ")", key));
  std::unique_ptr<cache::DiskCache::KeyLock> keyLock;
  if (disk.usable()) {
    auto l = disk.lock(key, std::atof(env::get("M3IDX_CACHE_LOCK_TIMEOUT_S").c_str()));
    if (!l.ok())
      std::cerr << "m3idx: warning: " << l.status().message() << "; compiling without it\n";
    else
      keyLock = std::move(l).value();
    if (keyLock && read)
      if (std::optional<cache::Entry> e = disk.read(key))
        return CachedEntry{std::move(*e), false};
  }
  StatusOr<cache::Entry> entry = compile();
  if (!entry.ok())
    return entry.status();
  (void)disk.write(*entry); // a failed write is warned about; the kernel still runs
  (void)disk.prune(env::get("M3IDX_CACHE_POLICY"), /*force=*/false);
  return CachedEntry{std::move(entry).value(), true};
}

} // namespace m3idx::runtime
