// What the conversions of the tile form (the host's, host/HostPatterns.h, and the GPUs',
// GpuPatterns.h) share: which ops hold tiles, which are elementwise on tiles, and a tile-form loop's
// replacement over index bounds. Internal to lowering/.
#pragma once

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/DialectConversion.h"

namespace m3idx::lowering {

// No operand or result of `op` is a tile (a ranked tensor).
bool holdsNoTiles(mlir::Operation *op);
// An elementwise op on tiles: a tile-typed arith op (not a constant: the tile form makes none),
// tensor.splat, iota, clampf or pack_score_key.
bool isElementwiseOnTiles(mlir::Operation *op);
// A loop over the index form of [lb, ub) by step (i64s) carrying `inits`, its body empty but for
// the i64 induction value (`inductionI64`, cast back first thing); the region's own yield ends it.
mlir::scf::ForOp createIndexLoop(mlir::ImplicitLocOpBuilder &b, mlir::ConversionPatternRewriter &rewriter,
                                 mlir::Value lb, mlir::Value ub, mlir::Value step, mlir::ValueRange inits,
                                 mlir::Value &inductionI64);

} // namespace m3idx::lowering
