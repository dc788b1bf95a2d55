// Builders of the indexer kernels (internal to kernels_src; use KernelCatalog.h).
#pragma once

#include <functional>

#include "dsl/Builder.h"
#include "kernels_src/KernelCatalog.h"

namespace m3idx::kernels {

StatusOr<dsl::Kernel> buildScoreDecode(const KernelConfig &c);
StatusOr<dsl::Kernel> buildScorePrefill(const KernelConfig &c);
StatusOr<dsl::Kernel> buildTopkDecode(const KernelConfig &c);
StatusOr<dsl::Kernel> buildTopkPrefill(const KernelConfig &c);
StatusOr<dsl::Kernel> buildDecodeKeys(const KernelConfig &c);

// The run of blocks each score_decode program of a request takes (i64 scalars): the request's
// `slots` over its `gridChunks` programs, but no shorter than a step of `units` (request, row
// tile) pairs all this long would need to spread over `activePrograms` programs, capped at
// `maxRun` -- so a grid sized for capacity gives a short step one-block programs and a large one
// runs of maxRun, each program's prologue paid for several blocks. score_decode splits by it and
// topk_decode finds the programs that had blocks by it: one definition (Nvfp4Score.cpp).
dsl::Value decodeRun(dsl::KernelBuilder &b, dsl::Value slots, const dsl::Divisor &gridChunks, dsl::Value units,
                     const dsl::Divisor &activePrograms, dsl::Value maxRun);

// Rows [first, last) of a list, each unsplit (its top 16 from its own score row of `width`): the
// trip's lengths (nblk, an i32 tile of R rows from `trip`, 0 past `last`) and each row's head row
// (of the score buffer and the output: an i64 tile of R list indices, clamped below `last`).
// longest: an i64 scalar no row of the list is longer than, where known without reducing a
// trip's lengths (a reduction over R lanes crosses the warps of a program of more than one).
struct TripRows {
  std::function<dsl::Value(dsl::Value trip)> lengths;
  std::function<dsl::Value(dsl::Value at)> headRow;
  dsl::Value width, longest;
};
// Their top-16 ids into `out` ([head row, 16] i32), R rows a trip (Topk.cpp): topk_prefill's
// unsplit rows, and a score_prefill program's own rows where it tops them itself.
void topkTrips(dsl::KernelBuilder &b, dsl::Buffer scores, dsl::Buffer out, int R, dsl::Value first, dsl::Value last,
               dsl::Value firstLengths, const TripRows &rows);

} // namespace m3idx::kernels
