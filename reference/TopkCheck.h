// Tie-aware comparison of a backend's top-k (and scores) with exact scores (`m3idx check`):
// slots may differ only between blocks whose exact scores tie within the fp32 summation bound.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/Batch.h"
#include "core/Status.h"

namespace m3idx::reference {

// Exact score of every (head, row, block < nblk) with its fp32 error bound.
struct ExactScores {
  int numHeads = 0;
  int64_t numRows = 0;
  int64_t width = 0;
  std::vector<double> score; // [H, T, W]; sentinels exact; all-NaN blocks -inf
  std::vector<double> bound; // [H, T, W]; |fp32 result - score| <= bound for any summation order
};

// Dot products in double are exact (E4M3 products have 8 significant bits and 128 of them span
// fewer than 53 bits), so this is the true score. Requires a validated batch.
ExactScores exactScores(const BatchView &batch, const RowPlan &plan);

struct CheckReport {
  int64_t rowsChecked = 0;
  int64_t nearTieSwaps = 0;
  int64_t mismatches = 0;
  double maxScoreError = 0;      // |score - exact| over checked scores
  double maxScoreErrorBound = 0; // the bound at that score
  std::vector<std::string> problems; // the first few, human readable
  bool ok() const { return mismatches == 0; }
};

// topk is [H, T, 16] (validated here: ids in [0, nblk), distinct, -1 past min(16, nblk)).
CheckReport checkTopk(const BatchView &batch, std::span<const int32_t> topk);
// scores is [H, T, W]; entries b >= nblk are not read.
void checkScores(const BatchView &batch, std::span<const float> scores, int64_t width,
                 CheckReport &report);

} // namespace m3idx::reference
