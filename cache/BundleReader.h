// AOT bundles (folders `m3idx compile --out` writes) as the kernel store reads them: the first
// usable entry for a key on M3IDX_AOT_PATH, trusted folders and entries only.
#pragma once

#include <optional>
#include <string>

#include "cache/EntryFile.h"
#include "core/Status.h"

namespace m3idx::cache {

// The entry for `key` in the first AOT bundle on M3IDX_AOT_PATH that has `file` (bundles name
// host objects llvmcache-KEY and GPU code objects gpucache-KEY). An unreadable entry, or one for
// another key, is skipped and described in `unusable`; a warning too, unless M3IDX_RUN_ONLY is set
// (runtime::cacheOrCompile's error then names it: one line for one cause). A bundle folder or
// entry another user could have written is an error (cache/FolderTrust.h).
StatusOr<std::optional<Entry>> findInBundles(const std::string &file, const std::string &key,
                                             std::string &unusable);

} // namespace m3idx::cache
