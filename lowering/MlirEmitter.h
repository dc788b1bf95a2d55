// Lowers a DSL kernel to MLIR in upstream dialects (func, arith, scf, vector, memref). The result
// is target-neutral: small-float conversions stay arith.extf / arith.truncf for each target's
// pipeline to legalize. On the host a kernel becomes a function over a range of program ids.
#pragma once

#include "core/Status.h"
#include "dsl/Ir.h"

namespace mlir {
class MLIRContext;
class ModuleOp;
template <typename OpTy> class OwningOpRef;
} // namespace mlir

namespace m3idx::lowering {

// Loads the dialects the emitter and the pipelines use.
void loadDialects(mlir::MLIRContext &ctx);

// func.func @<kernel>(buffers as memref<?xT>..., scalars..., %pid_begin: i64, %pid_end: i64)
// with llvm.emit_c_interface; the body loops over [pid_begin, pid_end).
StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> emitHostModule(mlir::MLIRContext &ctx,
                                                             const dsl::Kernel &kernel);

} // namespace m3idx::lowering
