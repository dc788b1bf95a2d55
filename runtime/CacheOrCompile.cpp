#include "runtime/CacheOrCompile.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "cache/EntryFile.h"
#include "cache/FolderTrust.h"
#include "core/EnvTable.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

namespace m3idx::runtime {

namespace fs = std::filesystem;

StatusOr<std::optional<cache::Entry>> findInBundles(const std::string &file, const std::string &key,
                                                    std::string &unusable) {
  const std::string path = env::get("M3IDX_AOT_PATH");
  llvm::SmallVector<llvm::StringRef> bundles;
  llvm::SplitString(path, bundles, ":");
  for (llvm::StringRef bundle : bundles) {
    const std::string at = (fs::path(bundle.str()) / file).string();
    std::error_code ec;
    if (!fs::exists(at, ec))
      continue;
    M3IDX_RETURN_IF_ERROR(cache::checkTrusted(bundle.str(), "AOT bundle folder"));
    M3IDX_RETURN_IF_ERROR(cache::checkTrusted(at, "AOT bundle entry"));
    std::ifstream in(at, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    StatusOr<cache::Entry> e = cache::decodeEntry(bytes, at);
    if (e.ok() && e->key == key)
      return std::optional<cache::Entry>(std::move(*e));
    // decodeEntry's message names the file.
    const std::string problem = fmt::format("AOT bundle entry unusable ({})",
                                            e.ok() ? at + ": an entry for another key" : e.status().message());
    unusable += (unusable.empty() ? "" : "; ") + problem;
    if (!env::flag("M3IDX_RUN_ONLY"))
      std::cerr << "m3idx: warning: " << problem << "; skipped\n";
  }
  return std::optional<cache::Entry>();
}

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
