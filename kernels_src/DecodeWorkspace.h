// The memory a device-metadata decode step works in (Indexer::decode's workspace): one block of
// bytes cut into the step's scratch roles, sized for capacities so that any step within them fits
// and a step only fills addresses. Backends bind StepBuffer::Scores, Partial, Arrivals,
// ProgramFlags and (when the caller gives no top-k buffer) Topk to base + offset.
//
// Invariant: the Arrivals region is zero before a step and the top-k leaves it zero after one
// (kernels_src/Topk.cpp), so a workspace zeroed once serves every later step, of every layer --
// also of Indexers of other configurations, since the region sits at offset 0 with one size for
// all (every other region is written by a step before it reads it).
#pragma once

#include <cstdint>

#include "core/Status.h"
#include "kernels_src/LaunchPlan.h"

namespace m3idx::kernels {

// The most (head, row) pairs a decode step has: 4 heads x 256 requests x 8 rows (the Indexer's
// limits, runtime/api/Indexer.cpp), the size of every layout's arrival-count region.
inline constexpr int64_t kMostDecodeHeadRows = 4 * 256 * 8;

struct DecodeWorkspaceLayout {
  // Byte offsets and sizes of each region (offsets 256-byte aligned).
  int64_t scores = 0, scoresBytes = 0;
  int64_t partial = 0, partialBytes = 0;
  int64_t arrivals = 0, arrivalBytes = 0;
  int64_t flags = 0, flagBytes = 0;
  int64_t topk = 0, topkBytes = 0;
  int64_t bytes = 0; // the whole workspace
};

// For decode steps of `heads` heads, up to `maxRows` rows, `width` score columns, whose decode
// score grids have at most `mostScorePrograms` programs over any tuning form
// (TargetTuning::mostDecodeScorePrograms), with `tuning`'s top-k split.
DecodeWorkspaceLayout decodeWorkspaceLayout(const StepTuning &tuning, int heads, int64_t maxRows, int64_t width,
                                            int64_t mostScorePrograms);

// Bytes a plan's launches use of each region (a backend keeps them with a plan it reuses).
struct WorkspaceNeeds {
  int64_t scores = 0, partial = 0, arrivals = 0, flags = 0, topk = 0;
};
WorkspaceNeeds workspaceNeeds(const StepPlan &plan);

// Whether those needs fit `layout`'s regions (the top-k's only with ownTopk: no caller's buffer);
// the error names the first that does not.
Status fitsWorkspace(const WorkspaceNeeds &needs, const DecodeWorkspaceLayout &layout, bool ownTopk);

} // namespace m3idx::kernels
