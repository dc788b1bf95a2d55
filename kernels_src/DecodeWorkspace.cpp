#include "kernels_src/DecodeWorkspace.h"

#include <algorithm>

namespace m3idx::kernels {

namespace {

int64_t alignUp(int64_t v) { return (v + 255) / 256 * 256; }

} // namespace

DecodeWorkspaceLayout decodeWorkspaceLayout(const StepTuning &tuning, int heads, int64_t maxRows, int64_t width,
                                            int64_t mostScorePrograms) {
  // Fewer rows may be cut into more top-k segments: the most over row counts.
  int64_t partialKeys = 1, arrivals = 1;
  for (int64_t rows = 1; rows <= maxRows; ++rows) {
    const TopkSplit split = topkSplit(heads * rows, width, tuning.topkPrograms);
    partialKeys = std::max(partialKeys, split.partialKeys(heads * rows));
    arrivals = std::max(arrivals, split.arrivals(heads * rows));
  }
  // Score programs (one flag each): units x ceil(target / units) (planDeviceDecode) is below
  // target + units, and units (requests x row tiles) are at most the rows.
  const int64_t programs = mostScorePrograms + maxRows;
  DecodeWorkspaceLayout l;
  int64_t at = 0;
  auto region = [&](int64_t &offset, int64_t &size, int64_t bytes) {
    offset = at;
    size = std::max<int64_t>(bytes, 4);
    at = alignUp(at + size);
  };
  // The arrival counts first, at one size for every configuration: they are the only region whose
  // contents a step relies on (zero), so workspaces shared by Indexers of different configurations
  // must find every configuration's counts where the others only ever leave zeros.
  region(l.arrivals, l.arrivalBytes, 4 * std::max(arrivals, kMostDecodeHeadRows));
  region(l.scores, l.scoresBytes, int64_t{heads} * maxRows * width * 4);
  region(l.partial, l.partialBytes, 8 * partialKeys);
  region(l.flags, l.flagBytes, 4 * programs);
  region(l.topk, l.topkBytes, int64_t{heads} * maxRows * 16 * 4);
  l.bytes = at;
  return l;
}

WorkspaceNeeds workspaceNeeds(const StepPlan &plan) {
  return {plan.elementsOf(StepBuffer::Scores) * 4, plan.elementsOf(StepBuffer::Partial) * 8,
          plan.elementsOf(StepBuffer::Arrivals) * 4, plan.elementsOf(StepBuffer::ProgramFlags) * 4,
          plan.elementsOf(StepBuffer::Topk) * 4};
}

Status fitsWorkspace(const WorkspaceNeeds &needs, const DecodeWorkspaceLayout &l, bool ownTopk) {
  const struct {
    const char *name;
    int64_t need, have;
  } regions[] = {{"scores", needs.scores, l.scoresBytes},
                 {"segment keys", needs.partial, l.partialBytes},
                 {"arrival counts", needs.arrivals, l.arrivalBytes},
                 {"program flags", needs.flags, l.flagBytes},
                 {"top-k", ownTopk ? needs.topk : 0, l.topkBytes}};
  for (const auto &r : regions)
    if (r.need > r.have)
      return Status::error(fmt::format("decode workspace: the step's {} need {} bytes, its region holds {} "
                                       "(a step past the capacities it was laid out for)",
                                       r.name, r.need, r.have));
  return Status();
}

} // namespace m3idx::kernels
