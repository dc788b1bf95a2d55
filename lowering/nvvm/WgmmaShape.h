// The query columns (wgmma m64nNk16's N) an sm_90 warpgroup dot takes in m3idx: a multiple of 8 up
// to 128 (the B tile m3idx stages in shared memory; the instruction itself goes to 256). Stated
// once, here: the lowering's wgmmaFits and sm_90's tuning table (which requests run as one
// warpgroup) both ask it. Header-only and free of MLIR, so the tuning tables, which the GPU
// backends link without LLVM, can include it.
#pragma once

#include <cstdint>

namespace m3idx::lowering {

constexpr int64_t kWgmmaMaxColumns = 128;
constexpr bool wgmmaTakesColumns(int64_t columns) {
  return columns > 0 && columns % 8 == 0 && columns <= kWgmmaMaxColumns;
}

} // namespace m3idx::lowering
