// Small MLIR building helpers every form's emitting uses (the common emitter, GpuThreads and the
// targets' programs). Internal to lowering/.
#pragma once

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace m3idx::lowering {

// A scalar or splat vector constant of type `t` (integer types take v truncated).
mlir::Value constant(mlir::ImplicitLocOpBuilder &b, mlir::Type t, double v);
// An i64 as an index; constants stay constants, so that loop utilities see constant trip counts
// (unroll hints).
mlir::Value toIndex(mlir::ImplicitLocOpBuilder &b, mlir::Value v);
// A float scalar or vector widened to f32 (as it is when it already is).
mlir::Value toF32(mlir::ImplicitLocOpBuilder &b, mlir::Value v);

} // namespace m3idx::lowering
