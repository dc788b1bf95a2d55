// The top-k ordering key of SPEC §5 (AITER's pack_score_key): larger key == earlier slot. NaN
// counts as -inf and -0.0 as +0.0, so every backend and the CP path order identically.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace m3idx {

inline uint32_t orderedScoreBits(float s) {
  if (std::isnan(s))
    s = -std::numeric_limits<float>::infinity();
  if (s == 0.0f)
    s = 0.0f; // -0.0 -> +0.0
  uint32_t u = std::bit_cast<uint32_t>(s);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

inline uint64_t packScoreKey(float score, int32_t block) {
  return (static_cast<uint64_t>(orderedScoreBits(score)) << 32) | static_cast<uint32_t>(block);
}

} // namespace m3idx
