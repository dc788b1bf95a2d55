// Generated cases for tests, demos and benchmarks (`m3idx gen`): realistic keys quantized from
// Gaussian vectors, or exact values whose fp32 dot products are exact in any summation order.
#pragma once

#include <cstdint>

#include "casefile/CaseFile.h"

namespace m3idx {

enum class ValueMode { Realistic, Exact };

struct Range {
  int64_t min = 0;
  int64_t max = 0;
};

struct GenOptions {
  uint64_t seed = 0;
  ValueMode mode = ValueMode::Realistic;
  int numHeads = 1;
  int initBlocks = 0;
  int localBlocks = 1;
  int numDecodes = 2;
  int decodeQueryLen = 4;
  Range decodeContext{1000, 4000}; // seq_lens of decode requests
  int numPrefills = 1;
  Range prefillQueryLen{1, 64};    // q_len of prefill requests
  Range prefillContext{64, 4000};  // seq_lens of prefill requests (raised to q_len)
  double nanScaleFraction = 0.0;   // share of scale bytes set to NaN (0x7F / 0xFF)
  int extraPages = 2;              // pages no row may read, filled with garbage
};

Status validateGenOptions(const GenOptions &o);
StatusOr<Case> generateCase(const GenOptions &o);

} // namespace m3idx
