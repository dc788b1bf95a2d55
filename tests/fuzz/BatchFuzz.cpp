// libFuzzer target: validateBatch on random metadata (parameters, seq_lens, query_start_loc, a
// block table with garbage in unused slots) against a small random index-K cache. Whatever it
// accepts, planRows and the reference indexer must run without a fault (ASan checks every read).
#include <cstdint>
#include <cstdlib>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "core/Batch.h"
#include "core/Spec.h"
#include "reference/ReferenceIndexer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace m3idx;
  FuzzedDataProvider in(data, size);
  BatchView b;
  b.params.numHeads = in.ConsumeIntegralInRange<int>(0, 5);
  b.params.initBlocks = in.ConsumeIntegralInRange<int>(-1, 3);
  b.params.localBlocks = in.ConsumeIntegralInRange<int>(-1, 3);
  b.params.decodeQueryLen = in.ConsumeIntegralInRange<int>(0, 9);
  b.numRequests = in.ConsumeIntegralInRange<int64_t>(0, 4);
  b.params.numDecodes = in.ConsumeIntegralInRange<int>(-1, 5);
  b.maxBlocks = in.ConsumeIntegralInRange<int64_t>(0, 6);
  b.numPages = in.ConsumeIntegralInRange<int64_t>(0, 4);
  b.numRows = in.ConsumeIntegralInRange<int64_t>(0, 40);
  // Values mostly near the valid range, sometimes anything.
  auto value = [&](int32_t lo, int32_t hi) {
    return in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(lo, hi) : in.ConsumeIntegral<int32_t>();
  };
  std::vector<int32_t> table(b.numRequests * b.maxBlocks), seqLens(b.numRequests), qsl(b.numRequests + 1);
  for (int32_t &v : table)
    v = value(-1, static_cast<int32_t>(b.numPages));
  for (int32_t &v : seqLens)
    v = value(0, 6 * 128);
  for (int32_t &v : qsl)
    v = value(0, static_cast<int32_t>(b.numRows));
  std::vector<uint8_t> kv = in.ConsumeBytes<uint8_t>(b.numPages * spec::kPageBytes);
  kv.resize(b.numPages * spec::kPageBytes, 0x5A);
  std::vector<uint8_t> q(b.numRows * std::max(b.params.numHeads, 0) * spec::kIndexHeadDim, 0x21);
  b.blockTable = table.data();
  b.seqLens = seqLens.data();
  b.queryStartLoc = qsl.data();
  b.kv = kv.data();
  b.q = q.data();
  if (!validateBatch(b).ok())
    return 0;
  (void)planRows(b);
  if (!reference::runReference(b, true).ok())
    std::abort();
  return 0;
}
