// m3idx's own MLIR passes. Registered under their command-line names so pass pipelines kept as
// text (and m3idx-opt in lit tests) can name them.
#pragma once

#include <memory>

namespace mlir {
class Pass;
} // namespace mlir

namespace m3idx::lowering {

// --m3idx-expand-small-floats: rewrites arith.extf from f4E2M1FN / f8E4M3FN and arith.truncf to
// f8E4M3FN (round to nearest even; the kernels clamp to +-448 first) into exact integer
// arithmetic on i8/i32, for targets without native small-float conversions (the host CPU).
std::unique_ptr<mlir::Pass> createExpandSmallFloatsPass();

void registerPasses(); // idempotent
} // namespace m3idx::lowering
