// A case's single batch (SPEC §3: one block table, one query_start_loc) split into the Indexer
// API's decode and prefill metadata, as an engine's metadata builder would.
#pragma once

#include <vector>

#include "core/Batch.h"
#include "m3idx/Indexer.h"

namespace m3idx::runtime {

struct BatchMetadata {
  DecodeMetadata decode;
  PrefillMetadata prefill;
  std::vector<int32_t> prefillQueryStartLoc; // rebased to 0
  bool hasDecode = false, hasPrefill = false;

  IndexerMetadata metadata() const {
    return IndexerMetadata{hasDecode ? &decode : nullptr, hasPrefill ? &prefill : nullptr};
  }
};

// The views point into `b`'s arrays (and the result's own rebased query_start_loc): keep both
// alive while they are used; do not move the result after taking metadata().
void splitBatch(const BatchView &b, BatchMetadata &out);

} // namespace m3idx::runtime
