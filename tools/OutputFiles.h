// Writes an IndexerOutput as SPEC §8's topk.npy / score.npy, all or nothing.
#pragma once

#include <string>

#include "core/IndexerOutput.h"
#include "core/Status.h"

namespace m3idx::cli {

Status writeOutput(const std::string &dir, const IndexerOutput &out, bool withScores);

} // namespace m3idx::cli
