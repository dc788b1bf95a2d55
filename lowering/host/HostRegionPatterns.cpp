// The host form of a kernel's function, its program id, and the tile form's loops and branches
// (host/HostPatterns.h). Wide loop-carried and branch values are not carried by scf: each has a
// buffer of its own, the init copied into it before the loop, the region's yield copying into it,
// and the region and the results read it.
#include "lowering/host/HostPatterns.h"

#include "lowering/TileConversion.h"

#include "lowering/Build.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tile/TileDialect.h"

namespace m3idx::lowering {

using namespace mlir;
using Values = SmallVector<mlir::Value>;

namespace {

// Position i: buffers[i] where there is one (a wide value), else the next of `carried` (by scf).
Values inBuffersOrCarried(const Values &buffers, ValueRange carried) {
  Values out;
  size_t j = 0;
  for (mlir::Value buf : buffers)
    out.push_back(buf ? buf : carried[j++]);
  return out;
}

// `op`, a loop or branch, replaced by `converted`, whose regions yield its wide values into
// `buffers` (null where a value is carried by scf).
LogicalResult replaceRegionOp(HostKernelState &kernel, ImplicitLocOpBuilder &b, ConversionPatternRewriter &rewriter,
                              Operation *op, Operation *converted, const Values &buffers) {
  kernel.yieldInto[converted] = buffers;
  Values results = inBuffersOrCarried(buffers, converted->getResults());
  kernel.defined(b, op, results);
  rewriter.replaceOp(op, results);
  return success();
}

// func @k(buffers..., scalars...) -> func @k(buffers..., scalars..., %pid_begin, %pid_end) with
// llvm.emit_c_interface, the body inside a loop over [pid_begin, pid_end).
class FunctionLowering final : public HostStatePattern<func::FuncOp> {
public:
  using HostStatePattern::HostStatePattern;

  LogicalResult matchAndRewrite(func::FuncOp fn, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(fn.getLoc(), rewriter);
    SmallVector<mlir::Type> argTypes(fn.getArgumentTypes());
    const size_t kernelArgs = argTypes.size();
    argTypes.append({b.getI64Type(), b.getI64Type()}); // pid_begin, pid_end
    auto host = func::FuncOp::create(b, fn.getName(), b.getFunctionType(argTypes, {}));
    host->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    // Through the builder, so that the conversion tracks the block (a rollback frees it).
    SmallVector<Location> argLocs(argTypes.size(), fn.getLoc());
    Block *entry = b.createBlock(&host.getBody(), {}, argTypes, argLocs);
    kernel_.tiles.beginFunction(entry);
    mlir::Value pidBegin = entry->getArgument(kernelArgs), pidEnd = entry->getArgument(kernelArgs + 1);
    auto loop = scf::ForOp::create(b, toIndex(b, pidBegin), toIndex(b, pidEnd), arith::ConstantIndexOp::create(b, 1));
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      kernel_.programId = arith::IndexCastOp::create(b, b.getI64Type(), loop.getInductionVar());
    }
    Block *body = &fn.front();
    rewriter.eraseOp(body->getTerminator());
    rewriter.inlineBlockBefore(body, loop.getBody()->getTerminator(), entry->getArguments().take_front(kernelArgs));
    func::ReturnOp::create(b);
    rewriter.eraseOp(fn);
    return success();
  }
};

class ProgramIdLowering final : public HostPattern<tile::ProgramIdOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::ProgramIdOp, Adaptor, ImplicitLocOpBuilder &) const override {
    return Values{kernel_.programId};
  }
};

// i64 bounds become index (the loop's i64 induction value cast back, first thing in the body);
// narrow iter args are carried as vectors, wide ones in buffers of their own.
class ForLowering final : public HostStatePattern<scf::ForOp> {
public:
  using HostStatePattern::HostStatePattern;

  LogicalResult matchAndRewrite(scf::ForOp op, OpAdaptor a, ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    HostTiles &tiles = kernel_.tiles;
    const size_t n = op.getNumResults();
    Values carried(n), inits;
    for (size_t i = 0; i < n; ++i) {
      mlir::Value init = a.getInitArgs()[i];
      if (!HostTiles::wide(op.getResult(i))) {
        inits.push_back(init);
        continue;
      }
      auto t = cast<ShapedType>(op.getResult(i).getType());
      carried[i] = tiles.entryAlloca(b, t.getNumElements(), HostTiles::storage(t.getElementType()));
      tiles.copy(b, carried[i], tiles.buffer(b, init), t.getNumElements());
    }
    Values args(1);
    auto forOp =
        createIndexLoop(b, rewriter, a.getLowerBound(), a.getUpperBound(), a.getStep(), inits, args[0]);
    args.append(inBuffersOrCarried(carried, forOp.getRegionIterArgs()));
    rewriter.mergeBlocks(op.getBody(), forOp.getBody(), args);
    return replaceRegionOp(kernel_, b, rewriter, op, forOp, carried);
  }
};

// Narrow results are the branch's, wide ones buffers both branches yield into.
class IfLowering final : public HostStatePattern<scf::IfOp> {
public:
  using HostStatePattern::HostStatePattern;

  LogicalResult matchAndRewrite(scf::IfOp op, OpAdaptor a, ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    const size_t n = op.getNumResults();
    Values joined(n);
    SmallVector<mlir::Type> types;
    for (size_t i = 0; i < n; ++i) {
      mlir::Value r = op.getResult(i);
      auto t = dyn_cast<ShapedType>(r.getType());
      if (HostTiles::wide(r))
        joined[i] = kernel_.tiles.entryAlloca(b, t.getNumElements(), HostTiles::storage(t.getElementType()));
      else
        types.push_back(getTypeConverter()->convertType(r.getType()));
    }
    auto ifOp = scf::IfOp::create(b, types, a.getCondition(), /*withElseRegion=*/true);
    for (int r = 0; r < 2; ++r) {
      Block *to = r == 0 ? ifOp.thenBlock() : ifOp.elseBlock();
      if (!to->empty()) // the builder's implicit yield (no results)
        rewriter.eraseOp(&to->back());
      rewriter.mergeBlocks(r == 0 ? op.thenBlock() : op.elseBlock(), to);
    }
    return replaceRegionOp(kernel_, b, rewriter, op, ifOp, joined);
  }
};

// Narrow values are yielded; wide ones copied into their region's buffers, sources first: one
// that is another position's target (a swap of iter args) is copied aside before any target is
// written.
class YieldLowering final : public HostStatePattern<scf::YieldOp> {
public:
  using HostStatePattern::HostStatePattern;

  LogicalResult matchAndRewrite(scf::YieldOp op, OpAdaptor a, ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    HostTiles &tiles = kernel_.tiles;
    const Values none;
    auto into = kernel_.yieldInto.find(op->getParentOp());
    const Values &to = into == kernel_.yieldInto.end() ? none : into->second;
    const size_t n = op.getNumOperands();
    Values from(n);
    for (size_t i = 0; i < n; ++i) {
      if (i >= to.size() || !to[i])
        continue;
      from[i] = tiles.buffer(b, a.getResults()[i]);
      for (size_t j = 0; j < to.size(); ++j)
        if (j != i && from[i] == to[j]) {
          auto t = cast<ShapedType>(op.getOperand(i).getType());
          mlir::Value aside = tiles.entryAlloca(b, t.getNumElements(), HostTiles::storage(t.getElementType()));
          tiles.copy(b, aside, from[i], t.getNumElements());
          from[i] = aside;
          break;
        }
    }
    Values narrow;
    for (size_t i = 0; i < n; ++i) {
      if (!from[i])
        narrow.push_back(a.getResults()[i]);
      else if (from[i] != to[i])
        tiles.copy(b, to[i], from[i], HostTiles::lanes(op.getOperand(i)));
    }
    scf::YieldOp::create(b, narrow);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void populateHostRegionPatterns(const HostTypeConverter &converter, RewritePatternSet &patterns, HostKernelState &kernel) {
  patterns.add<FunctionLowering, ProgramIdLowering, ForLowering, IfLowering, YieldLowering>(converter,
                                                                                           patterns.getContext(), kernel);
}

} // namespace m3idx::lowering
