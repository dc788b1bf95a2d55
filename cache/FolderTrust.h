// Whose code m3idx runs: compiled kernels from the disk cache and AOT bundles are executed inside
// the caller's process, so a folder or entry that another user could have written is refused, as
// ssh refuses a key file others can write (unless M3IDX_TRUST_SHARED_CACHE=1).
#pragma once

#include <string>

#include "core/Status.h"

namespace m3idx::cache {

// Ok when `path` (a folder or a file; symbolic links are followed) is owned by the effective user
// or root and not writable by group or others, or when M3IDX_TRUST_SHARED_CACHE=1; else an error
// naming `what`, the path, its owner or mode, and how to fix it. A missing path is ok (nothing to
// run).
Status checkTrusted(const std::string &path, const std::string &what);

// As checkTrusted, for the folder that holds a trusted one: a root-owned sticky folder (/tmp) also
// passes, since others may add files there but cannot rename or remove ours.
Status checkTrustedParent(const std::string &path, const std::string &what);

// Creates `dir` and its missing parents with mode 0700 (whatever the umask), so a new cache is
// private from its first byte.
Status createPrivateFolders(const std::string &dir);

} // namespace m3idx::cache
