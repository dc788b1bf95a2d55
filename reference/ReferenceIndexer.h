// The scalar reference indexer (`--backend ref`): score and top-k of SPEC §4-5 for decode, prefill
// and mixed batches, and a 4-rank simulation of decode context parallelism (SPEC §6).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/Batch.h"
#include "core/DecodeCpPolicy.h"
#include "core/IndexerOutput.h"
#include "core/Status.h"

namespace m3idx::reference {

// Validates the batch, then scores and selects.
StatusOr<IndexerOutput> runReference(const BatchView &batch, bool keepScores);

// Decode CP over `worldSize` simulated ranks, rank h holding head h of a batch with numHeads ==
// worldSize (the TP4 picture). Decode rows go through the all-gather / split-score / all-to-all
// data flow; prefill rows, and any step CP does not serve, are scored locally. Output equals
// runReference bit for bit. `fallbackReason` (if non-null) receives why CP was not used.
StatusOr<IndexerOutput> runReferenceDecodeCp(const BatchView &batch, int worldSize,
                                             std::string *fallbackReason = nullptr);

} // namespace m3idx::reference
