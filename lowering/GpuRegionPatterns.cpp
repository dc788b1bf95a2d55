// The GPU form of a kernel's function, its program id, and the tile form's loops and branches
// (GpuPatterns.h). Loops get index bounds; a loop's unroll hint, as far as the target takes it,
// is applied once the conversion is done (GpuConversion.cpp), on the converted loop.
#include "lowering/GpuPatterns.h"
#include "lowering/TileConversion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace m3idx::lowering {

using namespace mlir;
using Values = SmallVector<mlir::Value>;

namespace {

// A GPU pattern of an op with regions, replaced by the pattern itself.
template <typename SourceOp>
class GpuRegionPattern : public OpConversionPattern<SourceOp> {
public:
  GpuRegionPattern(const TypeConverter &converter, MLIRContext *ctx, GpuKernelState &kernel)
      : OpConversionPattern<SourceOp>(converter, ctx), kernel_(kernel) {}

protected:
  GpuKernelState &kernel_;
};

// func @k(buffers..., scalars...) -> gpu.module @m3idx_kernels { gpu.func @k(...) kernel } with
// the planned workgroup buffers, the body after the program's bindings.
class FunctionLowering final : public GpuRegionPattern<func::FuncOp> {
public:
  using GpuRegionPattern::GpuRegionPattern;

  LogicalResult matchAndRewrite(func::FuncOp fn, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    kernel_.enter(rewriter, fn);
    auto gpuModule = gpu::GPUModuleOp::create(kernel_.builder(), "m3idx_kernels");
    gpu::GPUFuncOp kernel = kernel_.declareKernel(gpuModule);
    Block *entry = &kernel.getBody().front();
    Block *body = &fn.front();
    rewriter.eraseOp(body->getTerminator());
    rewriter.inlineBlockBefore(body, entry, entry->end(), entry->getArguments().take_front(fn.getNumArguments()));
    rewriter.setInsertionPointToEnd(entry);
    gpu::ReturnOp::create(rewriter, fn.getLoc());
    rewriter.eraseOp(fn);
    return success();
  }
};

class ProgramIdLowering final : public GpuPattern<tile::ProgramIdOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::ProgramIdOp, Adaptor) const override { return {kernel_.programId()}; }
};

// i64 bounds become index (the loop's i64 induction value cast back, first thing in the body);
// the target's unroll factor is kept as m3idx.unroll for after the conversion.
class ForLowering final : public GpuRegionPattern<scf::ForOp> {
public:
  using GpuRegionPattern::GpuRegionPattern;

  LogicalResult matchAndRewrite(scf::ForOp op, OpAdaptor a, ConversionPatternRewriter &rewriter) const override {
    kernel_.enter(rewriter, op);
    ImplicitLocOpBuilder &b = kernel_.builder();
    Values args(1);
    auto forOp = createIndexLoop(b, rewriter, a.getLowerBound(), a.getUpperBound(), a.getStep(), a.getInitArgs(),
                                 args[0]);
    auto hint = op->getAttrOfType<IntegerAttr>("m3idx.unroll");
    if (int64_t factor = kernel_.program().loopUnroll(hint ? hint.getInt() : 1); factor > 1)
      forOp->setAttr("m3idx.unroll", b.getI64IntegerAttr(factor));
    args.append(forOp.getRegionIterArgs().begin(), forOp.getRegionIterArgs().end());
    rewriter.mergeBlocks(op.getBody(), forOp.getBody(), args);
    kernel_.defined(op, forOp.getResults());
    rewriter.replaceOp(op, forOp.getResults());
    return success();
  }
};

class IfLowering final : public GpuRegionPattern<scf::IfOp> {
public:
  using GpuRegionPattern::GpuRegionPattern;

  LogicalResult matchAndRewrite(scf::IfOp op, OpAdaptor a, ConversionPatternRewriter &rewriter) const override {
    kernel_.enter(rewriter, op);
    SmallVector<mlir::Type> types;
    for (mlir::Value r : op.getResults())
      types.push_back(kernel_.valueType(r));
    auto ifOp = scf::IfOp::create(kernel_.builder(), types, a.getCondition(), /*withElseRegion=*/true);
    for (int r = 0; r < 2; ++r) {
      Block *to = r == 0 ? ifOp.thenBlock() : ifOp.elseBlock();
      if (!to->empty()) // the builder's implicit yield (no results)
        rewriter.eraseOp(&to->back());
      rewriter.mergeBlocks(r == 0 ? op.thenBlock() : op.elseBlock(), to);
    }
    kernel_.defined(op, ifOp.getResults());
    rewriter.replaceOp(op, ifOp.getResults());
    return success();
  }
};

class YieldLowering final : public GpuRegionPattern<scf::YieldOp> {
public:
  using GpuRegionPattern::GpuRegionPattern;

  LogicalResult matchAndRewrite(scf::YieldOp op, OpAdaptor a, ConversionPatternRewriter &rewriter) const override {
    kernel_.enter(rewriter, op);
    scf::YieldOp::create(kernel_.builder(), a.getResults());
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void populateGpuRegionPatterns(const TypeConverter &converter, RewritePatternSet &patterns, GpuKernelState &kernel) {
  patterns.add<FunctionLowering, ProgramIdLowering, ForLowering, IfLowering, YieldLowering>(
      converter, patterns.getContext(), kernel);
}

} // namespace m3idx::lowering
