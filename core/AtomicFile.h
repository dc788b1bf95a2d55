// Whole-file writes that never leave a partial file behind: a temporary file in the destination's
// directory, flushed, then renamed over the destination.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"

namespace m3idx {

Status writeFileAtomically(const std::string &path, std::string_view content);

// Writes several files so that either all appear or (on an error before the renames) none does.
struct PendingFile {
  std::string path;
  std::string content;
};
Status writeFilesAtomically(const std::vector<PendingFile> &files);

} // namespace m3idx
