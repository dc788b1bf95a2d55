// One indexer step as borrowed host arrays (SPEC §3), its validation (SPEC §7) and the per-row
// plan (request, causal length, visible blocks) that every backend derives identically.
#pragma once

#include <cstdint>
#include <vector>

#include "core/Status.h"

namespace m3idx {

// The code-shaping parameters of a step (case.json in SPEC §8).
struct IndexerParams {
  int numHeads = 1;
  int initBlocks = 0;
  int localBlocks = 1;
  int numDecodes = 0;
  int decodeQueryLen = 4;
};

// Host pointers into contiguous arrays; shapes as SPEC §3 names them.
struct BatchView {
  IndexerParams params;
  const uint8_t *q = nullptr;      // [numRows, numHeads, 128]
  int64_t numRows = 0;             // T
  const uint8_t *kv = nullptr;     // [numPages, 9216]
  int64_t numPages = 0;
  const int32_t *blockTable = nullptr; // [numRequests, maxBlocks]
  int64_t numRequests = 0;         // R
  int64_t maxBlocks = 0;           // M
  const int32_t *seqLens = nullptr;        // [R]
  const int32_t *queryStartLoc = nullptr;  // [R + 1]

  const uint8_t *page(int32_t id) const { return kv + static_cast<int64_t>(id) * 9216; }
  int32_t pageOf(int64_t request, int64_t block) const {
    return blockTable[request * maxBlocks + block];
  }
};

struct RowInfo {
  int32_t request = 0;
  int32_t rowInRequest = 0;
  int32_t qLen = 0;
  int32_t causalLen = 0;
  int32_t nblk = 0;
};

struct RowPlan {
  std::vector<RowInfo> rows; // one per query row, in row order
  int32_t maxNblk = 0;
  int64_t scoreWidth = 64;   // W of SPEC §4
};

// Checks the parameters and every metadata value a kernel would trust (SPEC §7): heads,
// init/local, decode layout, query_start_loc, seq_lens, the 8192-block limit, block-table width
// and every page id a visible row reads. Shapes are the caller's to check (they come with the
// arrays). The message names the argument, the expected and the actual value.
Status validateParams(const IndexerParams &params);
Status validateBatch(const BatchView &batch);

// Requires a batch that passed validateBatch.
RowPlan planRows(const BatchView &batch);

} // namespace m3idx
