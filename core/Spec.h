// The constants of SPEC §1 and §3 and the two derived sizes every backend shares (blocks a row
// sees, score-buffer width). One place, so no backend can drift from the contract.
#pragma once

#include <cstdint>
#include <type_traits>

namespace m3idx::spec {

inline constexpr int kIndexHeadDim = 128;
inline constexpr int kSparseBlockSize = 128;          // tokens per block == per index-K page
inline constexpr int kTopkBlocks = 16;
inline constexpr int kMaxBlocksPerRow = 8192;         // 1,048,576 tokens
inline constexpr int64_t kMaxTokensPerRow = int64_t{kMaxBlocksPerRow} * kSparseBlockSize; // a row's most tokens
inline constexpr int kScaleGroup = 16;                // elements per E4M3 scale
inline constexpr int kScalesPerToken = kIndexHeadDim / kScaleGroup;   // 8
inline constexpr int kDataBytesPerToken = kIndexHeadDim / 2;          // 64 (two nibbles a byte)
inline constexpr int kPageDataBytes = kSparseBlockSize * kDataBytesPerToken; // 8192
inline constexpr int kPageBytes = kPageDataBytes + kSparseBlockSize * kScalesPerToken; // 9216
inline constexpr int kMaxIndexHeads = 4;

// Decode context parallelism (SPEC §6).
inline constexpr int kCpWorld = 4;
inline constexpr int kCpQueryLen = 4;
inline constexpr int kCpMaxRequests = 256;

// Sentinels of SPEC §4 ("two tiers so the sinks outrank the window").
inline constexpr float kLocalSentinel = 1e29f;
inline constexpr float kInitSentinel = 1e30f;

inline bool isSupportedHeadCount(int h) { return h == 1 || h == 2 || h == 4; }

// causal_len = max(L - q_len + r + 1, 0) for row r of a request with q_len rows and L tokens.
inline int64_t causalLen(int64_t seqLen, int64_t qLen, int64_t row) {
  int64_t c = seqLen - qLen + row + 1;
  return c > 0 ? c : 0;
}

// Blocks of `tokens` tokens: for an int64_t here, and for an i64 value of the DSL, whose operators
// build the same expression in a kernel (kernels_src/).
template <class T>
  requires std::is_class_v<T>
T blocksFor(const T &tokens) {
  return (tokens + (kSparseBlockSize - 1)) / kSparseBlockSize;
}
inline int64_t blocksFor(int64_t tokens) { return (tokens + (kSparseBlockSize - 1)) / kSparseBlockSize; }

// W = pow2ceil(ceil(max_nblk / 64)) * 64. A step in which no row sees a block still gets one
// 64-wide column group (pow2ceil(0) taken as 1), so the buffer is never zero-sized.
inline int64_t scoreWidth(int64_t maxNblk) {
  int64_t groups = (maxNblk + 63) / 64;
  int64_t p = 1;
  while (p < groups)
    p <<= 1;
  return p * 64;
}

} // namespace m3idx::spec
