// The GPU targets' form as conversion patterns over the tile dialect (tile/TileOps.td), one per op:
// a kernel's func.func becomes a gpu.func (a program is a CTA / workgroup of a form's threads) in
// gpu.module @m3idx_kernels, blocked tiles become each thread's vector of its lanes (GpuTypes.h,
// GpuThreads.h), and every tile op, tile-typed arith op, splat, loop and branch its GPU form. A
// target's own layouts are its program's patterns (TargetProgram::addPatterns: sm_90's
// nvvm/Sm90Patterns.cpp), tried first. Patterns of ops: GpuOpPatterns.cpp; of the function, loops
// and branches: GpuRegionPatterns.cpp; the driver: GpuConversion.cpp. Internal to lowering/.
#pragma once

#include "core/Status.h"
#include "dsl/Ir.h"
#include "lowering/GpuKernelState.h"
#include "lowering/Target.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Transforms/DialectConversion.h"

namespace m3idx::lowering {

// A GPU pattern of one op kind, with the kernel's state: lower() emits the GPU form of `op` (before
// it, through the state's builder, which enter() pointed there) and returns the values of its
// results; the base replaces `op` by them and stages a dot_tiles b operand where it is defined.
template <typename SourceOp>
class GpuPattern : public mlir::OpConversionPattern<SourceOp> {
public:
  using Adaptor = typename SourceOp::Adaptor;
  GpuPattern(const mlir::TypeConverter &converter, mlir::MLIRContext *ctx, GpuKernelState &kernel,
             mlir::PatternBenefit benefit = 1)
      : mlir::OpConversionPattern<SourceOp>(converter, ctx, benefit), kernel_(kernel) {}

  mlir::LogicalResult matchAndRewrite(SourceOp op, Adaptor adaptor,
                                      mlir::ConversionPatternRewriter &rewriter) const final {
    if (mlir::failed(takes(op)))
      return mlir::failure();
    kernel_.enter(rewriter, op);
    llvm::SmallVector<mlir::Value> results = lower(op, adaptor);
    kernel_.defined(op, results);
    rewriter.replaceOp(op, results);
    return mlir::success();
  }

protected:
  // Whether this pattern takes `op` (a target's pattern: a tile in its own layout).
  virtual mlir::LogicalResult takes(SourceOp) const { return mlir::success(); }
  virtual llvm::SmallVector<mlir::Value> lower(SourceOp op, Adaptor adaptor) const = 0;
  ImplicitLocOpBuilder &b() const { return kernel_.builder(); }

  GpuKernelState &kernel_;
};

void populateGpuOpPatterns(const mlir::TypeConverter &converter, mlir::RewritePatternSet &patterns,
                           GpuKernelState &kernel);
void populateGpuRegionPatterns(const mlir::TypeConverter &converter, mlir::RewritePatternSet &patterns,
                               GpuKernelState &kernel);
// Which ops the GPU form has: no tile op, no op on a tensor, no func.func, no scf.for over i64.
void configureGpuTarget(mlir::ConversionTarget &target);

// The tile-form kernel in `module` (one func.func) converted in place to `form`'s GPU module: its
// layout pass, the plan, the patterns. An error names the op that has no form (its kernel line).
Status convertToGpu(mlir::ModuleOp module, const GpuForm &form);

// --m3idx-to-sm90 and --m3idx-to-gfx950 in m3idx-opt: convertToGpu on a module of tile form.
void registerGpuConversionPasses();

} // namespace m3idx::lowering
