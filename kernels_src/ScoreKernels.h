// Builders of the indexer kernels (internal to kernels_src; use KernelCatalog.h).
#pragma once

#include "dsl/Builder.h"
#include "kernels_src/KernelCatalog.h"

namespace m3idx::kernels {

StatusOr<dsl::Kernel> buildScoreDecode(const KernelConfig &c);
StatusOr<dsl::Kernel> buildScorePrefill(const KernelConfig &c);
StatusOr<dsl::Kernel> buildTopkDecode(const KernelConfig &c);
StatusOr<dsl::Kernel> buildTopkPrefill(const KernelConfig &c);

// The run of blocks each score_decode program of a request takes (i64 scalars): the request's
// `slots` over its `gridChunks` programs, but no shorter than a step of `units` (request, row
// tile) pairs all this long would need to spread over `activePrograms` programs, capped at
// `maxRun` -- so a grid sized for capacity gives a short step one-block programs and a large one
// runs of maxRun, each program's prologue paid for several blocks. score_decode splits by it and
// topk_decode finds the programs that had blocks by it: one definition (Nvfp4Score.cpp).
dsl::Value decodeRun(dsl::KernelBuilder &b, dsl::Value slots, const dsl::Divisor &gridChunks, dsl::Value units,
                     const dsl::Divisor &activePrograms, dsl::Value maxRun);

} // namespace m3idx::kernels
