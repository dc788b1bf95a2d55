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

// Threads of one GPU program (a CTA / workgroup): one warp.
inline constexpr int kGpuThreads = 32;

// gpu.module @m3idx_kernels { gpu.func @<kernel>(buffers as memref<?xT>..., scalars...) kernel }:
// a program is a CTA of kGpuThreads threads (program id = block id); a tile of N lanes is spread
// blocked over the threads (N >= 32: N/32 consecutive lanes each; N < 32: thread t holds lane t);
// scalars are uniform. Cross-lane ops use gpu.shuffle and a workgroup buffer.
StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> emitGpuModule(mlir::MLIRContext &ctx,
                                                            const dsl::Kernel &kernel);

} // namespace m3idx::lowering
