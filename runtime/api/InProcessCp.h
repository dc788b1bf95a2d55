// Decode CP on the host backend with in-process ranks (`m3idx run --backend host --cp 4`): a case
// with `world` index heads is split so rank h holds head h (num_index_heads == 1, as at TP4); each
// rank is an Indexer on its own thread; the result is the case's [world, T, 16] top-k.
#pragma once

#include <string>

#include "core/Batch.h"
#include "core/IndexerOutput.h"
#include "core/Status.h"

namespace m3idx::runtime {

// `fallbackReason` (if non-null) receives why CP did not serve the decode rows, if it did not.
StatusOr<IndexerOutput> runHostDecodeCp(const BatchView &batch, int world,
                                        std::string *fallbackReason = nullptr);

} // namespace m3idx::runtime
