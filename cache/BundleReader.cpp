#include "cache/BundleReader.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "cache/FolderTrust.h"
#include "core/EnvTable.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

namespace m3idx::cache {

namespace fs = std::filesystem;

StatusOr<std::optional<Entry>> findInBundles(const std::string &file, const std::string &key,
                                             std::string &unusable) {
  const std::string path = env::get("M3IDX_AOT_PATH");
  llvm::SmallVector<llvm::StringRef> bundles;
  llvm::SplitString(path, bundles, ":");
  for (llvm::StringRef bundle : bundles) {
    const std::string at = (fs::path(bundle.str()) / file).string();
    std::error_code ec;
    if (!fs::exists(at, ec))
      continue;
    M3IDX_RETURN_IF_ERROR(checkTrusted(bundle.str(), "AOT bundle folder"));
    M3IDX_RETURN_IF_ERROR(checkTrusted(at, "AOT bundle entry"));
    std::ifstream in(at, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    StatusOr<Entry> e = decodeEntry(bytes, at);
    if (e.ok() && e->key == key)
      return std::optional<Entry>(std::move(*e));
    // decodeEntry's message names the file.
    const std::string problem = fmt::format("AOT bundle entry unusable ({})",
                                            e.ok() ? at + ": an entry for another key" : e.status().message());
    unusable += (unusable.empty() ? "" : "; ") + problem;
    if (!env::flag("M3IDX_RUN_ONLY"))
      std::cerr << "m3idx: warning: " << problem << "; skipped\n";
  }
  return std::optional<Entry>();
}

} // namespace m3idx::cache
