// The GPU form of each op of the tile form on blocked tiles (GpuPatterns.h): elementwise ops,
// splat and iota are thread-local; extracts, reductions and shuffles cross lanes (GpuThreads.h);
// loads and stores are the thread's lanes; scalar stores and atomics are one thread's; dots run on
// FFMA; the NVFP4 decode is the target program's (and dots on matrix units its patterns).
#include "lowering/GpuPatterns.h"
#include "lowering/TileConversion.h"

#include <fmt/format.h>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"

namespace m3idx::lowering {

using namespace mlir;
using Values = SmallVector<mlir::Value>;

namespace {

int64_t lanesOf(mlir::Value tile) { return cast<ShapedType>(tile.getType()).getNumElements(); }

// ---- elementwise: arith ops on tiles (and maxnumf on scalars), splat, iota, clampf, pack_score_key ----

bool isElementwise(Operation *op) { return isa<arith::MaxNumFOp>(op) || isElementwiseOnTiles(op); }

class ElementwiseOnTiles final : public ConversionPattern {
public:
  ElementwiseOnTiles(const TypeConverter &converter, MLIRContext *ctx, GpuKernelState &kernel)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), 1, ctx), kernel_(kernel) {}

  LogicalResult matchAndRewrite(Operation *op, ArrayRef<mlir::Value> operands,
                                ConversionPatternRewriter &rewriter) const override {
    if (!isElementwise(op) || op->getNumResults() != 1)
      return failure();
    kernel_.enter(rewriter, op);
    mlir::Value result = lower(op, operands, kernel_.valueType(op->getResult(0)));
    kernel_.defined(op, result);
    rewriter.replaceOp(op, result);
    return success();
  }

private:
  mlir::Value lower(Operation *op, ArrayRef<mlir::Value> in, mlir::Type type) const {
    ImplicitLocOpBuilder &b = kernel_.builder();
    if (isa<tensor::SplatOp>(op))
      return vector::BroadcastOp::create(b, type, in[0]);
    if (isa<arith::MaxNumFOp>(op))
      return kernel_.maxNum(in[0], in[1]);
    if (isa<tile::IotaOp>(op)) {
      auto vt = cast<VectorType>(type); // lane * k + [0, k)
      const int64_t k = vt.getNumElements();
      SmallVector<int64_t> steps;
      for (int64_t i = 0; i < k; ++i)
        steps.push_back(i);
      mlir::Value base = vector::BroadcastOp::create(
          b, vt, arith::MulIOp::create(b, kernel_.gpu().laneI64(), constant(b, b.getI64Type(), k)));
      return arith::AddIOp::create(b, base,
                                   arith::ConstantOp::create(b, DenseElementsAttr::get(vt, ArrayRef<int64_t>(steps))));
    }
    if (auto clamp = dyn_cast<tile::ClampFOp>(op)) {
      const double bound = clamp.getBound().convertToDouble();
      mlir::Type t = in[0].getType();
      return arith::MaximumFOp::create(b, arith::MinimumFOp::create(b, in[0], constant(b, t, bound)),
                                       constant(b, t, -bound));
    }
    if (isa<tile::PackScoreKeyOp>(op))
      return packScoreKey(b, in[0], in[1]);
    if (auto ext = dyn_cast<arith::ExtFOp>(op))
      if (auto decode = ext.getIn().getDefiningOp<tile::DecodeNvfp4Op>())
        if (mlir::Value keys = kernel_.program().keysF32(decode))
          return keys; // the decode itself becomes dead and is removed
    OperationState state(b.getLoc(), op->getName()); // the same arith op (its predicate, flags) on vectors
    state.addOperands(in);
    state.addTypes(type);
    state.addAttributes(op->getAttrs());
    return b.create(state)->getResult(0);
  }

  GpuKernelState &kernel_;
};

// ---- across lanes ----

class ExtractLowering final : public GpuPattern<tile::ExtractOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::ExtractOp op, Adaptor a) const override {
    return {kernel_.gpu().extract(a.getTile(), lanesOf(op.getTile()), static_cast<int64_t>(op.getLane()))};
  }
};

class ExtractAtLowering final : public GpuPattern<tile::ExtractAtOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::ExtractAtOp op, Adaptor a) const override {
    return {kernel_.gpu().extractDynamic(a.getTile(), lanesOf(op.getTile()), a.getLane())};
  }
};

class ShuffleLowering final : public GpuPattern<tile::ShuffleOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::ShuffleOp op, Adaptor a) const override {
    auto splat = [](mlir::Value v) { return v.getDefiningOp<tensor::SplatOp>() != nullptr; };
    auto t = cast<ShapedType>(op.getLhs().getType());
    return {kernel_.gpu().shuffle(a.getLhs(), a.getRhs(), t.getNumElements(), op.getMask(),
                                  elemOf(t.getElementType()), {splat(op.getLhs()), splat(op.getRhs())})};
  }
};

template <typename ReduceOp, bool Add>
class ReduceLowering final : public GpuPattern<ReduceOp> {
  using GpuPattern<ReduceOp>::GpuPattern;
  using typename GpuPattern<ReduceOp>::Adaptor;
  Values lower(ReduceOp op, Adaptor a) const override {
    const bool isF = isa<FloatType>(getElementTypeOrSelf(a.getTile().getType()));
    return {this->kernel_.gpu().warpReduce(a.getTile(), lanesOf(op.getTile()), Add, isF)};
  }
};

class DotLowering final : public GpuPattern<tile::DotOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::DotOp op, Adaptor a) const override {
    mlir::Value prod = arith::MulFOp::create(b(), a.getLhs(), a.getRhs());
    return {kernel_.gpu().warpReduce(prod, lanesOf(op.getLhs()), /*add=*/true, /*isFloat=*/true)};
  }
};

// Pairs d apart must be in one thread's lanes.
class FoldMaxLowering final : public GpuPattern<tile::FoldMaxOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::FoldMaxOp op, Adaptor a) const override {
    GpuThreads &gpu = kernel_.gpu();
    const int64_t lanes = lanesOf(op.getTile()), d = static_cast<int64_t>(op.getPairs());
    if (gpu.partial(lanes / 2) || gpu.chunk(lanes) % (2 * d) != 0) {
      kernel_.fail(fmt::format("fold.max: pairs {} apart across threads ({} lanes, {} per thread)", d, lanes,
                               gpu.partial(lanes) ? 1 : gpu.chunk(lanes)));
      return {constant(b(), kernel_.valueType(op.getResult()), 0)};
    }
    // lanes i (bit d clear) and i + d of the vector this thread holds
    mlir::Value in = a.getTile();
    const int64_t n = cast<VectorType>(in.getType()).getNumElements();
    SmallVector<int64_t> low, high;
    for (int64_t i = 0; i < n; ++i)
      if ((i & d) == 0) {
        low.push_back(i);
        high.push_back(i + d);
      }
    return {kernel_.maxNum(vector::ShuffleOp::create(b(), in, in, low), vector::ShuffleOp::create(b(), in, in, high))};
  }
};

class ReduceMaxGroupsLowering final : public GpuPattern<tile::ReduceMaxGroupsOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::ReduceMaxGroupsOp op, Adaptor a) const override {
    return {kernel_.gpu().reduceMaxGroups(a.getTile(), lanesOf(op.getTile()), static_cast<int64_t>(op.getGroups()))};
  }
};

// ---- memory ----

class LoadLowering final : public GpuPattern<tile::LoadOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::LoadOp, Adaptor a) const override {
    return {memref::LoadOp::create(b(), a.getBuffer(), ValueRange{toIndex(b(), a.getOffset())})};
  }
};

class LoadTileLowering final : public GpuPattern<tile::LoadTileOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::LoadTileOp op, Adaptor a) const override {
    auto t = cast<ShapedType>(op.getType());
    return {kernel_.gpu().loadTile(a.getBuffer(), a.getOffset(), t.getNumElements(), t.getElementType(),
                                   static_cast<int64_t>(op.getAlign()))};
  }
};

class LoadTileMaskedLowering final : public GpuPattern<tile::LoadTileMaskedOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::LoadTileMaskedOp op, Adaptor a) const override {
    auto t = cast<ShapedType>(op.getType());
    return {kernel_.gpu().loadTileMasked(a.getBuffer(), a.getOffset(), a.getLimit(), t.getNumElements(),
                                         t.getElementType(), static_cast<int64_t>(op.getAlign()))};
  }
};

class LoadGatherLowering final : public GpuPattern<tile::LoadGatherOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::LoadGatherOp op, Adaptor a) const override {
    auto t = cast<ShapedType>(op.getType());
    return {kernel_.gpu().loadGather(a.getBuffer(), a.getOffsets(), a.getMask(), t.getNumElements(),
                                     t.getElementType())};
  }
};

// Each thread's row whole (GpuThreads::loadRows): a program of one row a thread is the only form
// the kernels use; another spread of rows over threads is a named error, not a slow gather.
class LoadRowsLowering final : public GpuPattern<tile::LoadRowsOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::LoadRowsOp op, Adaptor a) const override {
    auto t = cast<ShapedType>(op.getType());
    const int64_t rows = lanesOf(op.getStarts()), width = t.getNumElements() / rows;
    GpuThreads &gpu = kernel_.gpu();
    if (rows != gpu.threads() || gpu.chunk(t.getNumElements()) != width) {
      kernel_.fail(fmt::format("load.rows of {} rows x {}: a program of {} threads holds one row a thread only",
                               rows, width, gpu.threads()));
      return {constant(b(), VectorType::get({gpu.chunk(t.getNumElements())}, t.getElementType()), 0)};
    }
    return {gpu.loadRows(a.getBuffer(), a.getStarts(), a.getCounts(), width, t.getElementType(),
                         static_cast<int64_t>(op.getAlign()))};
  }
};

// Scalars are uniform: one thread writes.
class StoreLowering final : public GpuPattern<tile::StoreOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::StoreOp, Adaptor a) const override {
    auto first = scf::IfOp::create(b(), TypeRange{}, kernel_.gpu().laneBelow(1), /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b());
    b().setInsertionPoint(first.thenBlock()->getTerminator());
    memref::StoreOp::create(b(), a.getValue(), a.getBuffer(), ValueRange{toIndex(b(), a.getOffset())});
    return {};
  }
};

class StoreTileLowering final : public GpuPattern<tile::StoreTileOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::StoreTileOp op, Adaptor a) const override {
    kernel_.gpu().storeTile(a.getBuffer(), a.getOffset(), a.getValue(), lanesOf(op.getValue()), op.getAlign());
    return {};
  }
};

class StoreScatterLowering final : public GpuPattern<tile::StoreScatterOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::StoreScatterOp op, Adaptor a) const override {
    kernel_.gpu().storeScatter(a.getBuffer(), a.getOffsets(), a.getValue(), a.getMask(), lanesOf(op.getValue()));
    return {};
  }
};

class AtomicAddLowering final : public GpuPattern<tile::AtomicAddOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::AtomicAddOp, Adaptor a) const override {
    return {kernel_.gpu().atomicAdd(a.getBuffer(), a.getOffset(), a.getValue())};
  }
};

template <typename GridOp>
class GridOrderLowering final : public GpuPattern<GridOp> {
  using GpuPattern<GridOp>::GpuPattern;
  using typename GpuPattern<GridOp>::Adaptor;
  Values lower(GridOp, Adaptor) const override {
    this->kernel_.program().orderGrids(std::is_same_v<GridOp, tile::GridAwaitOp>);
    return {};
  }
};

// A workgroup barrier orders the program's global-memory accesses across its threads as well as
// its workgroup memory's (PTX bar.sync; AMDGPU's workgroup-scope fences around s_barrier).
class ProgramSyncLowering final : public GpuPattern<tile::ProgramSyncOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::ProgramSyncOp, Adaptor) const override {
    kernel_.gpu().barrier();
    return {};
  }
};

// ---- NVFP4, dots, layouts ----

class DecodeNvfp4Lowering final : public GpuPattern<tile::DecodeNvfp4Op> {
  using GpuPattern::GpuPattern;
  Values lower(tile::DecodeNvfp4Op op, Adaptor a) const override {
    if (tile::layoutOf(op.getType()) == Spread::MmaRows) // whole scale groups per thread by construction
      return {kernel_.program().decodeNvfp4(a.getPacked(), a.getScales())};
    GpuThreads &gpu = kernel_.gpu();
    const int64_t P = lanesOf(op.getPacked());
    const int64_t outChunk = gpu.chunk(2 * P);
    const int64_t S = lanesOf(op.getScales());
    const bool ownScales = outChunk % 16 == 0 && !gpu.partial(S) && gpu.chunk(S) * 16 == outChunk;
    if (gpu.partial(P) || outChunk != 2 * gpu.chunk(P) || (16 % outChunk != 0 && !ownScales)) {
      kernel_.fail(fmt::format("nvfp4.decode of {} packed bytes does not distribute over {} threads", P,
                               kernel_.threads()));
      return {constant(b(), kernel_.valueType(op.getResult()), 0)};
    }
    kernel_.setDecodeScaleLanes(S);
    return {kernel_.program().decodeNvfp4(a.getPacked(), a.getScales())};
  }
};

// On FFMA (dots on a matrix unit are the target's own patterns).
class DotTilesLowering final : public GpuPattern<tile::DotTilesOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::DotTilesOp op, Adaptor a) const override {
    return {kernel_.ffmaDotTiles(op, a.getLhs(), a.getRhs())};
  }
};

// Through a workgroup buffer of the tile's lanes, by the target (which says where it has none).
class ConvertLayoutLowering final : public GpuPattern<tile::ConvertLayoutOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::ConvertLayoutOp op, Adaptor a) const override {
    const Spread from = tile::layoutOf(op.getTile().getType()), to = tile::layoutOf(op.getType());
    mlir::Value converted =
        kernel_.program().convertLayout(lanesOf(op.getTile()), a.getTile(), from, to, kernel_.convertBuffer(op));
    if (!converted)
      kernel_.fail(fmt::format("{} has no convert_layout from {} to {}", kernel_.targetName(),
                               tile::stringifyLayout(from).str(), tile::stringifyLayout(to).str()));
    return {converted ? converted : a.getTile()};
  }
};

// A staged loop's hand-over, with the roles in one group: its values, as made.
class StageLowering final : public GpuPattern<tile::StageOp> {
  using GpuPattern::GpuPattern;
  Values lower(tile::StageOp, Adaptor a) const override { return Values(a.getValues()); }
};

} // namespace

void populateGpuOpPatterns(const TypeConverter &converter, RewritePatternSet &patterns, GpuKernelState &kernel) {
  patterns.add<ElementwiseOnTiles, ExtractLowering, ExtractAtLowering, ShuffleLowering,
               ReduceLowering<tile::ReduceAddOp, true>, ReduceLowering<tile::ReduceMaxOp, false>, DotLowering,
               FoldMaxLowering, ReduceMaxGroupsLowering, LoadLowering, LoadTileLowering, LoadTileMaskedLowering,
               LoadGatherLowering, LoadRowsLowering,
               StoreLowering, StoreTileLowering, StoreScatterLowering, AtomicAddLowering,
               GridOrderLowering<tile::GridAwaitOp>, GridOrderLowering<tile::GridReleaseOp>, ProgramSyncLowering,
               DecodeNvfp4Lowering, DotTilesLowering, ConvertLayoutLowering, StageLowering>(converter, patterns.getContext(), kernel);
}

} // namespace m3idx::lowering
