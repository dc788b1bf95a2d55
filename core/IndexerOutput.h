// What one indexer step produces on the host, whatever backend ran it: top-k [H, T, 16] and,
// when asked for, the score buffer [H, T, W] with NaN where b >= nblk (SPEC §8's file form).
#pragma once

#include <cstdint>
#include <vector>

namespace m3idx {

struct IndexerOutput {
  int numHeads = 0;
  int64_t numRows = 0;
  int64_t scoreWidth = 0;
  std::vector<int32_t> topk;
  std::vector<float> scores; // empty unless asked for
};

} // namespace m3idx
