// The scalar score and top-k of SPEC §4-5 as building blocks, shared by the plain reference and the
// 4-rank CP simulation so both run literally the same scoring code.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "core/Batch.h"

namespace m3idx::reference {

// q vector (128 E4M3 bytes) of (global row, head).
using QueryFn = std::function<const uint8_t *(int64_t row, int head)>;
// Receives S[head, row, block].
using ScoreSink = std::function<void(int head, int64_t row, int32_t block, float score)>;

// Scores block `block` of request `request` for every row of that request that sees it and every
// head in [0, numHeads), sentinels included. Keys are decoded once per block for all rows/heads.
void scoreRequestBlock(const BatchView &batch, const RowPlan &plan, int64_t request,
                       int32_t block, int numHeads, const QueryFn &query, const ScoreSink &sink);

// Top-k of one (head, row): scores[b] for b < nblk; writes 16 ids (-1 past min(16, nblk)).
void topkRow(std::span<const float> scores, int32_t nblk, std::span<int32_t> out);

} // namespace m3idx::reference
