// The dot.tiles shapes sm_90's matrix units take in m3idx, stated once, here: sm_90's layout pass
// (nvvm/Sm90Layouts.cpp), its program's emitting (Sm90Mma::mmaFits, Sm90Wgmma::wgmmaFits) and sm_90's
// tuning table (which decode requests run as one warpgroup) all ask these. Header-only and free
// of MLIR, so the tuning tables, which the GPU backends link without LLVM, can include it.
#pragma once

#include <cstdint>

namespace m3idx::lowering {

// The query columns (wgmma m64nNk16's N) a warpgroup dot takes: a multiple of 8 up to 128 (the B
// tile m3idx stages in shared memory; the instruction itself goes to 256).
constexpr int64_t kWgmmaMaxColumns = 128;
constexpr bool wgmmaTakesColumns(int64_t columns) {
  return columns > 0 && columns % 8 == 0 && columns <= kWgmmaMaxColumns;
}

// A dot.tiles of e4m3 rows of k = 128 lanes: `keyLanes` lanes of keys (a) against `queryLanes` of
// queries (b), in a program of `threads` threads.
struct Sm90DotShape {
  int threads = 0;
  bool e4m3Keys = false, e4m3Queries = false;
  int64_t k = 0, keyLanes = 0, queryLanes = 0;
};
inline constexpr int64_t kSm90RowK = 128;      // the lanes of a key or query row
inline constexpr int64_t kMmaSyncTokens = 16;  // mma.sync m16n8k16's M
inline constexpr int64_t kMmaSyncMaxColumns = 64; // 8 column tiles of n8 (B fragments in shared memory past 4)
inline constexpr int64_t kWgmmaKeyTokens = 64; // wgmma m64nNk16's M: 16 per warp

// mma.sync on a one-warp program: 16 key tokens against up to 64 query columns.
constexpr bool mmaSyncTakes(const Sm90DotShape &d) {
  return d.threads == 32 && d.e4m3Keys && d.k == kSm90RowK && d.keyLanes == kMmaSyncTokens * kSm90RowK &&
         d.queryLanes % kSm90RowK == 0 && d.queryLanes / kSm90RowK <= kMmaSyncMaxColumns;
}
// wgmma on a warpgroup program: 64 key tokens against wgmmaTakesColumns query columns.
constexpr bool wgmmaTakes(const Sm90DotShape &d) {
  return d.threads == 128 && d.e4m3Keys && d.e4m3Queries && d.k == kSm90RowK &&
         d.keyLanes == kWgmmaKeyTokens * kSm90RowK && d.queryLanes % kSm90RowK == 0 &&
         wgmmaTakesColumns(d.queryLanes / kSm90RowK);
}

} // namespace m3idx::lowering
