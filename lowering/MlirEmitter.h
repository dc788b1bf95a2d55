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

// How a GPU target runs a program: one warp / wavefront of `threads` threads, and which matrix
// and conversion instructions the emitter may use directly.
struct GpuForm {
  int threads = 32;
  bool gfx950 = false; // MFMA f8f6f4 for dot.tiles, v_cvt_scalef32_pk_f32_fp4 / v_cvt_pk_fp8_f32
};
inline constexpr GpuForm kSm90Form{32, false};
inline constexpr GpuForm kGfx950Form{64, true};

// gpu.module @m3idx_kernels { gpu.func @<kernel>(buffers as memref<?xT>..., scalars...) kernel }:
// a program is a CTA / workgroup of form.threads threads (program id = block id); a tile of N
// lanes is spread blocked over the threads (N >= threads: N/threads consecutive lanes each;
// otherwise thread t holds lane t); scalars are uniform. Cross-lane ops use gpu.shuffle and
// workgroup buffers.
StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> emitGpuModule(mlir::MLIRContext &ctx,
                                                            const dsl::Kernel &kernel,
                                                            const GpuForm &form);

} // namespace m3idx::lowering
