// Lowers a DSL kernel to a GPU target's MLIR (gpu, arith, scf, vector, memref, and the target's
// own ops) by the GPU conversion patterns (GpuPatterns.h) on its tile form (tile/FromDsl.h): where
// a pattern picks an instruction the module already holds it (sm_90: nvvm.prmt, the mma and
// wgmma calls, nvvm.maxnreg; gfx950: the amdgpu/rocdl MFMA and conversions); small-float
// conversions stay arith.extf / arith.truncf for the target's pipeline to legalize. The host's
// module is host/HostPatterns.h's emitHostModule.
#pragma once

#include "core/Status.h"
#include "dsl/Ir.h"
#include "lowering/Target.h"

namespace mlir {
class MLIRContext;
class ModuleOp;
template <typename OpTy> class OwningOpRef;
} // namespace mlir

namespace m3idx::lowering {

// gpu.module @m3idx_kernels { gpu.func @<kernel>(buffers as memref<?xT>..., scalars...) kernel }:
// a program is a CTA / workgroup of form.threads threads (program id = block id); a tile of N
// lanes is spread blocked over the threads (N >= threads: N/threads consecutive lanes each;
// otherwise thread t holds lane t); scalars are uniform. Cross-lane ops use gpu.shuffle and
// workgroup buffers.
StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> emitGpuModule(mlir::MLIRContext &ctx,
                                                            const dsl::Kernel &kernel,
                                                            const GpuForm &form);

// The kernel as the tile dialect, each tile's type encoding where its lanes live in `form`
// (#m3idx.layout<blocked>, <mma_rows>, <mma_acc>, <wgmma_acc>, ...) and each dot_tiles' unit
// (`m3idx.unit`).
StatusOr<std::string> gpuLayouts(mlir::MLIRContext &ctx, const dsl::Kernel &kernel, const GpuForm &form);

} // namespace m3idx::lowering
