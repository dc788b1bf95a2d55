#include "runtime/api/BatchMetadata.h"

#include <algorithm>

namespace m3idx::runtime {

void splitBatch(const BatchView &b, BatchMetadata &out) {
  const int64_t D = b.params.numDecodes, R = b.numRequests, P = R - D, M = b.maxBlocks;
  auto i32 = [](const int32_t *p, std::initializer_list<int64_t> shape) {
    return TensorView::contiguous(const_cast<int32_t *>(p), DType::I32, shape);
  };
  out.hasDecode = D > 0;
  out.decode.blockTable = i32(b.blockTable, {D, M});
  out.decode.seqLens = i32(b.seqLens, {D});
  out.decode.decodeQueryLen = b.params.decodeQueryLen;
  out.decode.maxSeqLen = D ? *std::max_element(b.seqLens, b.seqLens + D) : 0;
  out.hasPrefill = P > 0;
  out.prefillQueryStartLoc.resize(P + 1);
  for (int64_t i = 0; i <= P; ++i)
    out.prefillQueryStartLoc[i] = b.queryStartLoc[D + i] - b.queryStartLoc[D];
  out.prefill.blockTable = i32(b.blockTable + D * M, {P, M});
  out.prefill.seqLens = i32(b.seqLens + D, {P});
  out.prefill.queryStartLoc = i32(out.prefillQueryStartLoc.data(), {P + 1});
  out.prefill.maxSeqLen = P ? *std::max_element(b.seqLens + D, b.seqLens + R) : 0;
  out.prefill.maxQueryLen = 0;
  for (int64_t i = 0; i < P; ++i)
    out.prefill.maxQueryLen = std::max<int64_t>(
        out.prefill.maxQueryLen, out.prefillQueryStartLoc[i + 1] - out.prefillQueryStartLoc[i]);
}

} // namespace m3idx::runtime
