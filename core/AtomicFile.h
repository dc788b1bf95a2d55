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

// Whether a file name is one of these writes' temporaries ("<name>.tmpXXXXXX"): a writer killed
// before its rename leaves one behind, complete or not, which no reader ever opens by that name.
bool isUnfinishedWrite(std::string_view fileName);

} // namespace m3idx
