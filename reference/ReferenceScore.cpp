#include "reference/ReferenceScore.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/Nvfp4.h"
#include "core/Spec.h"
#include "core/TopkKey.h"

namespace m3idx::reference {

namespace {

// Decodes tokens [first, first + count) of a page to fp32 key values.
void decodeTokens(const uint8_t *page, int first, int count, float *out) {
  const auto &keyTable = nvfp4::keyByteTable();
  const auto &e4m3 = nvfp4::e4m3Table();
  for (int t = 0; t < count; ++t) {
    int slot = first + t;
    const uint8_t *data = page + slot * spec::kDataBytesPerToken;
    const uint8_t *scales = page + spec::kPageDataBytes + slot * spec::kScalesPerToken;
    for (int d = 0; d < spec::kIndexHeadDim; ++d) {
      uint8_t nibble = (data[d / 2] >> ((d & 1) * 4)) & 0xF;
      out[t * spec::kIndexHeadDim + d] = e4m3[keyTable[nibble][scales[d / spec::kScaleGroup]]];
    }
  }
}

float dot(const float *q, const float *k) {
  float acc = 0.0f; // fp32, d ascending; products of two E4M3 values are exact in fp32
  for (int d = 0; d < spec::kIndexHeadDim; ++d)
    acc += q[d] * k[d];
  return acc;
}

} // namespace

void scoreRequestBlock(const BatchView &batch, const RowPlan &plan, int64_t request,
                       int32_t block, int numHeads, const QueryFn &query, const ScoreSink &sink) {
  const int64_t rowBegin = batch.queryStartLoc[request];
  const int64_t rowEnd = batch.queryStartLoc[request + 1];
  const int64_t tokenBegin = int64_t{block} * spec::kSparseBlockSize;
  const int64_t seqLen = batch.seqLens[request];
  const int count =
      static_cast<int>(std::min<int64_t>(spec::kSparseBlockSize, seqLen - tokenBegin));
  if (count <= 0)
    return;
  std::vector<float> keys(static_cast<size_t>(count) * spec::kIndexHeadDim);
  decodeTokens(batch.page(batch.pageOf(request, block)), 0, count, keys.data());

  const auto &e4m3 = nvfp4::e4m3Table();
  float qf[spec::kIndexHeadDim];
  for (int64_t row = rowBegin; row < rowEnd; ++row) {
    const RowInfo &info = plan.rows[row];
    if (block >= info.nblk)
      continue;
    const int visible = static_cast<int>(
        std::min<int64_t>(count, int64_t{info.causalLen} - tokenBegin));
    for (int h = 0; h < numHeads; ++h) {
      const uint8_t *qb = query(row, h);
      for (int d = 0; d < spec::kIndexHeadDim; ++d)
        qf[d] = e4m3[qb[d]];
      float best = -std::numeric_limits<float>::infinity();
      for (int t = 0; t < visible; ++t)
        best = std::fmax(best, dot(qf, &keys[t * spec::kIndexHeadDim])); // fmax drops NaN
      if (block >= info.nblk - batch.params.localBlocks)
        best = spec::kLocalSentinel;
      else if (block < batch.params.initBlocks)
        best = spec::kInitSentinel;
      sink(h, row, block, best);
    }
  }
}

void topkRow(std::span<const float> scores, int32_t nblk, std::span<int32_t> out) {
  std::vector<uint64_t> keys(nblk);
  for (int32_t b = 0; b < nblk; ++b)
    keys[b] = packScoreKey(scores[b], b);
  const int32_t n = std::min<int32_t>(spec::kTopkBlocks, nblk);
  std::partial_sort(keys.begin(), keys.begin() + n, keys.end(), std::greater<>());
  for (int s = 0; s < spec::kTopkBlocks; ++s)
    out[s] = s < n ? static_cast<int32_t>(keys[s] & 0xFFFFFFFFu) : -1;
}

} // namespace m3idx::reference
