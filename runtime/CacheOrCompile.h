// The cache halves of obtaining any compiled kernel (host object or GPU code object): AOT bundles,
// then the disk cache (an untrusted one is an error): read the key's entry (unless M3IDX_ALWAYS_COMPILE), else refuse under
// M3IDX_RUN_ONLY, else take the key's inter-process lock, read again (another process may have
// just compiled it), compile, write.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "cache/BundleReader.h"
#include "cache/DiskCache.h"
#include "core/Status.h"

namespace m3idx::runtime {

struct CachedEntry {
  cache::Entry entry;
  bool compiled = false; // false: read from the cache
};

// `what` names the kernel in errors ("kernel K (config) for target T"); `searched` says where it
// was looked for ("the cache DIR", or more for host kernels); `unusable`: the bundle entries
// cache::findInBundles skipped, named in the M3IDX_RUN_ONLY error with a corrupted cache entry.
StatusOr<CachedEntry> cacheOrCompile(cache::DiskCache &disk, const std::string &key,
                                     const std::string &what, const std::string &searched,
                                     const std::function<StatusOr<cache::Entry>()> &compile,
                                     std::string unusable = "");

} // namespace m3idx::runtime
