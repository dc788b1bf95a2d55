// Whether a step's decode rows are served by context parallelism (SPEC §6), and if not, why. A
// pure function of the config and the step's metadata, so every rank decides the same.
#pragma once

#include <string>

#include "core/Batch.h"

namespace m3idx {

struct CpDecision {
  bool useCp = false;
  std::string fallbackReason; // empty when useCp
};

// totalParams.numHeads counts the heads of the whole TP group (one per rank at TP4).
CpDecision decideDecodeCp(const IndexerParams &totalParams, int worldSize, bool dualBatchOverlap);

} // namespace m3idx
