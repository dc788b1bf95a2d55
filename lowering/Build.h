// Small MLIR building helpers every form's emitting uses (the common emitter, GpuThreads and the
// targets' programs), and the target-neutral arith forms of two DSL ops. Internal to lowering/.
#pragma once

#include <string>

#include "dsl/Ir.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace m3idx::lowering {

// A scalar or splat vector constant of type `t` (integer types take v truncated).
mlir::Value constant(mlir::ImplicitLocOpBuilder &b, mlir::Type t, double v);
// An i64 as an index; constants stay constants, so that loop utilities see constant trip counts
// (unroll hints).
mlir::Value toIndex(mlir::ImplicitLocOpBuilder &b, mlir::Value v);
// A float scalar or vector widened to f32 (as it is when it already is).
mlir::Value toF32(mlir::ImplicitLocOpBuilder &b, mlir::Value v);
mlir::Type elemType(mlir::OpBuilder &b, dsl::Elem e); // the builtin type of a DSL element type

// " (at kernels_src/File.cpp:LINE)" for an op the DSL knows the source of, else "": lowering
// errors name the kernel line.
std::string sourceOf(const dsl::Op &op);
mlir::Location locOf(mlir::OpBuilder &b, const dsl::Op &op); // FileLineColLoc, or unknown
std::string sourceOf(mlir::Location loc); // the same for an op of the tile form

// SPEC §2's key bytes in target-neutral arith (the host's form): `scaleBytes` one E4M3 scale per
// 16 of the 2 x P decoded elements of `packed` (vector<P x i8>).
mlir::Value decodeNvfp4Exact(mlir::ImplicitLocOpBuilder &b, mlir::Value packed, mlir::Value scaleBytes);
// SPEC §5's top-k order as one i64 compare: (score, block id) of scalars or vectors of one shape.
mlir::Value packScoreKey(mlir::ImplicitLocOpBuilder &b, mlir::Value score, mlir::Value block);

} // namespace m3idx::lowering
