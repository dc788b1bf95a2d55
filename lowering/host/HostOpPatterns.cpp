// The host form of each op of the tile form (host/HostPatterns.h). An op on tiles of at most
// HostTiles::kPiece lanes becomes its vector form; one with a wider operand or result a loop over
// pieces of stack buffers (HostTiles.h), its vector form emitted once on a piece where it is
// elementwise.
#include "lowering/host/HostPatterns.h"

#include "lowering/TileConversion.h"

#include <fmt/format.h>

#include <limits>

#include "lowering/Build.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "tile/TileDialect.h"

namespace m3idx::lowering {

using namespace mlir;
using Values = SmallVector<mlir::Value>;

namespace {

bool anyWide(Operation *op) {
  return llvm::any_of(op->getOperandTypes(), [](mlir::Type t) { return HostTiles::wide(t); }) ||
         llvm::any_of(op->getResultTypes(), [](mlir::Type t) { return HostTiles::wide(t); });
}

VectorType vectorOf(mlir::Value tile) {
  auto t = cast<ShapedType>(tile.getType());
  return VectorType::get({t.getNumElements()}, t.getElementType());
}

// ---- elementwise: arith ops on tiles, splat, iota, clampf, pack_score_key ----

// `op` on `operands` (scalars, or vectors of one shape) with result type `type`.
mlir::Value elementwiseOn(ImplicitLocOpBuilder &b, Operation *op, ValueRange operands, mlir::Type type) {
  if (isa<tensor::SplatOp>(op))
    return vector::BroadcastOp::create(b, type, operands[0]);
  if (isa<tile::IotaOp>(op)) {
    auto vt = cast<VectorType>(type);
    SmallVector<int64_t> lanes;
    for (int64_t i = 0; i < vt.getNumElements(); ++i)
      lanes.push_back(i);
    return arith::ConstantOp::create(b, DenseElementsAttr::get(vt, ArrayRef<int64_t>(lanes)));
  }
  if (auto clamp = dyn_cast<tile::ClampFOp>(op)) {
    const double bound = clamp.getBound().convertToDouble();
    return arith::MaximumFOp::create(b, arith::MinimumFOp::create(b, operands[0], constant(b, type, bound)),
                                     constant(b, type, -bound));
  }
  if (isa<tile::PackScoreKeyOp>(op))
    return packScoreKey(b, operands[0], operands[1]);
  OperationState state(b.getLoc(), op->getName()); // the same arith op (its predicate, flags) on vectors
  state.addOperands(operands);
  state.addTypes(type);
  state.addAttributes(op->getAttrs());
  return b.create(state)->getResult(0);
}

class ElementwiseOnTiles final : public ConversionPattern {
public:
  ElementwiseOnTiles(const TypeConverter &converter, MLIRContext *ctx, HostKernelState &kernel)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), 1, ctx), kernel_(kernel) {}

  LogicalResult matchAndRewrite(Operation *op, ArrayRef<mlir::Value> operands,
                                ConversionPatternRewriter &rewriter) const override {
    if (!isElementwiseOnTiles(op))
      return failure();
    ImplicitLocOpBuilder b(op->getLoc(), rewriter);
    mlir::Value result = op->getResult(0);
    mlir::Value converted = HostTiles::wide(result) ? wide(b, op, operands)
                                                    : elementwiseOn(b, op, operands, typeConverter->convertType(result.getType()));
    kernel_.defined(b, op, converted);
    rewriter.replaceOp(op, converted);
    return success();
  }

private:
  // One loop over pieces: each tile operand's piece, the op on them, stored into the result's buffer.
  mlir::Value wide(ImplicitLocOpBuilder &b, Operation *op, ArrayRef<mlir::Value> operands) const {
    HostTiles &tiles = kernel_.tiles;
    mlir::Value result = op->getResult(0);
    auto rt = cast<ShapedType>(result.getType());
    if (isa<arith::BitcastOp>(op) && HostTiles::storage(rt.getElementType()) ==
                                         HostTiles::storage(getElementTypeOrSelf(op->getOperand(0).getType())))
      return tiles.buffer(b, operands[0]); // the same bytes: one buffer, never written again
    const bool uniform = isa<tensor::SplatOp, tile::IotaOp>(op); // pieces made where used, as constants
    mlir::Value out = tiles.newBuffer(b, result); // for ops that read the tile from memory
    tiles.forPieces(b, rt.getNumElements(), HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
      mlir::Value piece;
      if (uniform) {
        piece = tiles.pieceOf(b, result, out, at, n);
      } else {
        // Each tile operand's piece, in operand order; an operand used twice is read once more
        // and both uses take the last read (as the DSL emitter did: its pieces went by value).
        llvm::DenseMap<mlir::Value, mlir::Value> pieces;
        for (auto [tile, value] : llvm::zip(op->getOperands(), operands))
          if (isa<RankedTensorType>(tile.getType()))
            pieces[tile] = tiles.pieceOf(b, tile, value, at, n);
        Values in;
        for (auto [tile, value] : llvm::zip(op->getOperands(), operands))
          in.push_back(pieces.count(tile) ? pieces[tile] : value);
        piece = elementwiseOn(b, op, in, VectorType::get({n}, rt.getElementType()));
      }
      tiles.storePiece(b, out, rt.getElementType(), at, piece);
    });
    return out;
  }

  HostKernelState &kernel_;
};

// ---- lanes: extract, extract_at, shuffle ----

// A wide tile's lane: a load from its buffer.
mlir::Value wideLane(ImplicitLocOpBuilder &b, mlir::Value tile, mlir::Value buf, mlir::Value at) {
  mlir::Type elem = cast<ShapedType>(tile.getType()).getElementType();
  mlir::Value v = memref::LoadOp::create(b, buf, ValueRange{at});
  if (elem.isInteger(1))
    v = arith::TruncIOp::create(b, b.getI1Type(), v);
  else if (isa<Float8E4M3FNType>(elem))
    v = arith::BitcastOp::create(b, elem, v);
  return v;
}

class ExtractLowering final : public HostPattern<tile::ExtractOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::ExtractOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    if (!HostTiles::wide(op.getTile()))
      return Values{vector::ExtractOp::create(b, a.getTile(), ArrayRef<int64_t>{static_cast<int64_t>(op.getLane())})};
    return Values{wideLane(b, op.getTile(), a.getTile(), arith::ConstantIndexOp::create(b, op.getLane()))};
  }
};

class ExtractAtLowering final : public HostPattern<tile::ExtractAtOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::ExtractAtOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    if (!HostTiles::wide(op.getTile()))
      return Values{vector::ExtractOp::create(b, a.getTile(), ArrayRef<OpFoldResult>{toIndex(b, a.getLane())})};
    return Values{wideLane(b, op.getTile(), a.getTile(), toIndex(b, a.getLane()))};
  }
};

// Wide: any lane permutation, one output lane per trip, its source lane read from a constant table.
class ShuffleLowering final : public HostPattern<tile::ShuffleOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::ShuffleOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    ArrayRef<int32_t> lanesAttr = op.getMask();
    if (!anyWide(op)) {
      SmallVector<int64_t> mask(lanesAttr.begin(), lanesAttr.end());
      return Values{vector::ShuffleOp::create(b, a.getLhs(), a.getRhs(), mask)};
    }
    HostTiles &tiles = kernel_.tiles;
    const int64_t inLanes = HostTiles::lanes(op.getLhs()), outLanes = static_cast<int64_t>(lanesAttr.size());
    mlir::Value lhs = tiles.buffer(b, a.getLhs()), rhs = tiles.buffer(b, a.getRhs());
    mlir::Type stored = HostTiles::storage(cast<ShapedType>(op.getLhs().getType()).getElementType()), i32 = b.getI32Type();
    auto tableType = MemRefType::get({outLanes}, i32);
    std::string name = fmt::format("m3idx_shuffle_{}", kernel_.shuffleTables++);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(op->getParentOfType<ModuleOp>().getBody());
      memref::GlobalOp::create(b, name, b.getStringAttr("private"), tableType,
                               DenseElementsAttr::get(RankedTensorType::get({outLanes}, i32), lanesAttr),
                               /*constant=*/true, /*alignment=*/nullptr);
    }
    mlir::Value table = memref::GetGlobalOp::create(b, tableType, name);
    mlir::Value out = tiles.entryAlloca(b, outLanes, stored);
    auto loop = tiles.rolledLoop(b, 0, outLanes);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      mlir::Value j = loop.getInductionVar();
      mlir::Value src = arith::IndexCastOp::create(b, b.getIndexType(), memref::LoadOp::create(b, table, ValueRange{j}));
      src = arith::MaxSIOp::create(b, src, arith::ConstantIndexOp::create(b, 0)); // -1: any lane
      mlir::Value cL = arith::ConstantIndexOp::create(b, inLanes);
      mlir::Value fromA = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, src, cL);
      auto pick = scf::IfOp::create(b, TypeRange{stored}, fromA, /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard inner(b);
        b.setInsertionPointToEnd(pick.thenBlock());
        scf::YieldOp::create(b, ValueRange{memref::LoadOp::create(b, lhs, ValueRange{src})});
        b.setInsertionPointToEnd(pick.elseBlock());
        scf::YieldOp::create(b, ValueRange{memref::LoadOp::create(b, rhs, ValueRange{arith::SubIOp::create(b, src, cL)})});
      }
      memref::StoreOp::create(b, pick.getResult(0), out, ValueRange{j});
    }
    return Values{tiles.result(b, op.getResult(), out)};
  }
};

// ---- reductions: reduce_add, reduce_max, dot, reduce_max_groups, fold_max ----

// A tile's lanes summed (add) or their largest (maxnum, or signed max); with `rhs`, the sum of
// products. Wide: pieces fold elementwise into the first, which is then reduced: the same set of
// values as one reduction (fmaxf drops NaN either way; sums may be in any order, SPEC §4).
mlir::Value reduce(ImplicitLocOpBuilder &b, HostTiles &tiles, bool add, mlir::Value lhs, mlir::Value lhsConverted,
                   mlir::Value rhs = {}, mlir::Value rhsConverted = {}) {
  const bool isF = getElementTypeOrSelf(lhs.getType()).isF32();
  if (!HostTiles::wide(lhs)) {
    if (rhs) // any summation order is allowed (SPEC §4): reassoc lets the target pick a fast one
      return vector::ReductionOp::create(b, vector::CombiningKind::ADD, arith::MulFOp::create(b, lhsConverted, rhsConverted),
                                         mlir::Value(), arith::FastMathFlags::reassoc);
    vector::CombiningKind kind = add ? vector::CombiningKind::ADD
                                 : isF ? vector::CombiningKind::MAXNUMF
                                       : vector::CombiningKind::MAXSI;
    return vector::ReductionOp::create(b, kind, lhsConverted, mlir::Value(),
                                       isF ? arith::FastMathFlags::reassoc : arith::FastMathFlags::none);
  }
  auto pieceAt = [&](mlir::Value at, int64_t n) {
    mlir::Value v = tiles.pieceOf(b, lhs, lhsConverted, at, n);
    if (rhs)
      v = arith::MulFOp::create(b, v, tiles.pieceOf(b, rhs, rhsConverted, at, n));
    return v;
  };
  auto combine = [&](mlir::Value x, mlir::Value y) -> mlir::Value {
    if (add)
      return isF ? mlir::Value(arith::AddFOp::create(b, x, y, arith::FastMathFlags::reassoc))
                 : mlir::Value(arith::AddIOp::create(b, x, y));
    return isF ? mlir::Value(arith::MaxNumFOp::create(b, x, y)) : mlir::Value(arith::MaxSIOp::create(b, x, y));
  };
  const int64_t lanes = HostTiles::lanes(lhs);
  mlir::Value c0 = arith::ConstantIndexOp::create(b, 0), cP = arith::ConstantIndexOp::create(b, HostTiles::kPiece);
  const int64_t full = lanes / HostTiles::kPiece, tail = lanes % HostTiles::kPiece;
  auto loop = tiles.rolledLoop(b, 1, full, ValueRange{pieceAt(c0, HostTiles::kPiece)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(loop.getBody());
    mlir::Value at = arith::MulIOp::create(b, loop.getInductionVar(), cP);
    scf::YieldOp::create(b, ValueRange{combine(loop.getRegionIterArgs()[0], pieceAt(at, HostTiles::kPiece))});
  }
  vector::CombiningKind kind = add ? vector::CombiningKind::ADD
                               : isF ? vector::CombiningKind::MAXNUMF
                                     : vector::CombiningKind::MAXSI;
  auto fm = isF && add ? arith::FastMathFlags::reassoc : arith::FastMathFlags::none;
  mlir::Value r = vector::ReductionOp::create(b, kind, loop.getResult(0), mlir::Value(), fm);
  if (tail > 0)
    r = combine(r, vector::ReductionOp::create(b, kind, pieceAt(arith::ConstantIndexOp::create(b, lanes - tail), tail),
                                               mlir::Value(), fm));
  return r;
}

class ReduceAddLowering final : public HostPattern<tile::ReduceAddOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::ReduceAddOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    return Values{reduce(b, kernel_.tiles, /*add=*/true, op.getTile(), a.getTile())};
  }
};

class ReduceMaxLowering final : public HostPattern<tile::ReduceMaxOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::ReduceMaxOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    return Values{reduce(b, kernel_.tiles, /*add=*/false, op.getTile(), a.getTile())};
  }
};

class DotLowering final : public HostPattern<tile::DotOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::DotOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    return Values{reduce(b, kernel_.tiles, /*add=*/true, op.getLhs(), a.getLhs(), op.getRhs(), a.getRhs())};
  }
};

// Narrow: one reduction per group (vector.multi_reduction has no lowering in the host pipeline).
// Wide: a loop over the groups, each reduced from the tile's buffer.
class ReduceMaxGroupsLowering final : public HostPattern<tile::ReduceMaxGroupsOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::ReduceMaxGroupsOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    const int64_t lanes = HostTiles::lanes(op.getTile()), groups = static_cast<int64_t>(op.getGroups());
    const int64_t S = lanes / groups;
    mlir::Type f32 = b.getF32Type();
    if (!anyWide(op)) {
      mlir::Value out = constant(b, VectorType::get({groups}, f32), 0);
      for (int64_t g = 0; g < groups; ++g) {
        mlir::Value part = vector::ExtractStridedSliceOp::create(b, a.getTile(), ArrayRef<int64_t>{g * S},
                                                                 ArrayRef<int64_t>{S}, ArrayRef<int64_t>{1});
        mlir::Value m = vector::ReductionOp::create(b, vector::CombiningKind::MAXNUMF, part,
                                                    constant(b, f32, -std::numeric_limits<double>::infinity()),
                                                    arith::FastMathFlags::none);
        out = vector::InsertOp::create(b, m, out, ArrayRef<int64_t>{g});
      }
      return Values{out};
    }
    if (S > HostTiles::kPiece)
      return kernel_.fail(op, fmt::format("host: reduce.max.groups of {} lanes per group (at most {})", S,
                                          HostTiles::kPiece));
    HostTiles &tiles = kernel_.tiles;
    mlir::Value in = tiles.buffer(b, a.getTile()), out = tiles.entryAlloca(b, groups, f32);
    mlir::Value negInf = constant(b, f32, -std::numeric_limits<double>::infinity());
    auto loop = tiles.rolledLoop(b, 0, groups);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      mlir::Value g = loop.getInductionVar();
      mlir::Value first = arith::MulIOp::create(b, g, arith::ConstantIndexOp::create(b, S));
      mlir::Value piece = vector::LoadOp::create(b, VectorType::get({S}, f32), in, ValueRange{first});
      mlir::Value best =
          vector::ReductionOp::create(b, vector::CombiningKind::MAXNUMF, piece, negInf, arith::FastMathFlags::none);
      memref::StoreOp::create(b, best, out, ValueRange{g});
    }
    return Values{tiles.result(b, op.getResult(), out)};
  }
};

// Lanes i (bit d clear) and i + d. Wide: within pieces when a piece holds whole pairs' spans (2d
// divides it), else one output lane per trip.
class FoldMaxLowering final : public HostPattern<tile::FoldMaxOp> {
  using HostPattern::HostPattern;

  static mlir::Value foldVector(ImplicitLocOpBuilder &b, mlir::Value v, int64_t d) {
    const int64_t n = cast<VectorType>(v.getType()).getNumElements();
    SmallVector<int64_t> low, high;
    for (int64_t i = 0; i < n; ++i)
      if ((i & d) == 0) {
        low.push_back(i);
        high.push_back(i + d);
      }
    return arith::MaxNumFOp::create(b, vector::ShuffleOp::create(b, v, v, low), vector::ShuffleOp::create(b, v, v, high));
  }

  FailureOr<Values> lower(tile::FoldMaxOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    const int64_t lanes = HostTiles::lanes(op.getTile()), d = static_cast<int64_t>(op.getPairs());
    if (!anyWide(op))
      return Values{foldVector(b, a.getTile(), d)};
    HostTiles &tiles = kernel_.tiles;
    mlir::Type f32 = b.getF32Type();
    mlir::Value in = tiles.buffer(b, a.getTile()), out = tiles.entryAlloca(b, lanes / 2, f32);
    mlir::Value c2 = arith::ConstantIndexOp::create(b, 2);
    if (HostTiles::kPiece % (2 * d) == 0) {
      tiles.forPieces(b, lanes, HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
        mlir::Value v = vector::LoadOp::create(b, VectorType::get({n}, f32), in, ValueRange{at});
        mlir::Value m = foldVector(b, v, d);
        vector::StoreOp::create(b, m, out, ValueRange{arith::DivUIOp::create(b, at, c2)});
      });
    } else {
      auto loop = tiles.rolledLoop(b, 0, lanes / 2);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      mlir::Value j = loop.getInductionVar(), cd = arith::ConstantIndexOp::create(b, d);
      mlir::Value i = arith::AddIOp::create(
          b, arith::MulIOp::create(b, arith::DivUIOp::create(b, j, cd), arith::ConstantIndexOp::create(b, 2 * d)),
          arith::RemUIOp::create(b, j, cd));
      mlir::Value lo = memref::LoadOp::create(b, in, ValueRange{i});
      mlir::Value hi = memref::LoadOp::create(b, in, ValueRange{arith::AddIOp::create(b, i, cd)});
      memref::StoreOp::create(b, arith::MaxNumFOp::create(b, lo, hi), out, ValueRange{j});
    }
    return Values{tiles.result(b, op.getResult(), out)};
  }
};

// ---- memory: load, load_tile(_masked), load_gather, store, store_tile, store_scatter, atomic_add ----

class LoadLowering final : public HostPattern<tile::LoadOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::LoadOp, Adaptor a, ImplicitLocOpBuilder &b) const override {
    return Values{memref::LoadOp::create(b, a.getBuffer(), ValueRange{toIndex(b, a.getOffset())})};
  }
};

// Wide: a loop over pieces; masked, each piece takes a mask of clamp(limit - at, 0, n).
mlir::Value loadWide(ImplicitLocOpBuilder &b, HostTiles &tiles, mlir::Value tile, mlir::Value buf, mlir::Value offset,
                     mlir::Value limit) {
  auto t = cast<ShapedType>(tile.getType());
  mlir::Value out = tiles.newBuffer(b, tile);
  mlir::Type e = t.getElementType();
  mlir::Value clamped = limit ? mlir::Value(toIndex(b, arith::MinSIOp::create(b, limit, constant(b, b.getI64Type(),
                                                                                                t.getNumElements()))))
                              : mlir::Value();
  tiles.forPieces(b, t.getNumElements(), HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
    auto vt = VectorType::get({n}, e);
    mlir::Value from = arith::AddIOp::create(b, toIndex(b, offset), at);
    mlir::Value piece;
    if (!clamped) {
      piece = vector::LoadOp::create(b, vt, buf, ValueRange{from});
    } else {
      mlir::Value count = arith::MinSIOp::create(
          b, arith::MaxSIOp::create(b, arith::SubIOp::create(b, clamped, at), arith::ConstantIndexOp::create(b, 0)),
          arith::ConstantIndexOp::create(b, n));
      mlir::Value mask = vector::CreateMaskOp::create(b, VectorType::get({n}, b.getI1Type()), ValueRange{count});
      piece = vector::MaskedLoadOp::create(b, vt, buf, ValueRange{from}, mask, constant(b, vt, 0));
    }
    tiles.storePiece(b, out, e, at, piece);
  });
  return out;
}

class LoadTileLowering final : public HostPattern<tile::LoadTileOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::LoadTileOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    if (HostTiles::wide(op.getResult()))
      return Values{loadWide(b, kernel_.tiles, op.getResult(), a.getBuffer(), a.getOffset(), {})};
    return Values{vector::LoadOp::create(b, vectorOf(op.getResult()), a.getBuffer(), ValueRange{toIndex(b, a.getOffset())})};
  }
};

// Narrow: lanes below min(limit, lanes) read, the rest 0 (a masked load touches no memory for them).
class LoadTileMaskedLowering final : public HostPattern<tile::LoadTileMaskedOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::LoadTileMaskedOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    if (HostTiles::wide(op.getResult()))
      return Values{loadWide(b, kernel_.tiles, op.getResult(), a.getBuffer(), a.getOffset(), a.getLimit())};
    mlir::Type i64 = b.getI64Type();
    VectorType vt = vectorOf(op.getResult());
    const int64_t c = vt.getNumElements();
    mlir::Value first = constant(b, i64, 0);
    mlir::Value lim = arith::MinSIOp::create(b, a.getLimit(), constant(b, i64, c));
    mlir::Value count = arith::MaxSIOp::create(b, arith::SubIOp::create(b, lim, first), constant(b, i64, 0));
    mlir::Value mask =
        vector::CreateMaskOp::create(b, VectorType::get({c}, b.getI1Type()), ValueRange{toIndex(b, count)});
    mlir::Value at = toIndex(b, arith::AddIOp::create(b, a.getOffset(), first));
    return Values{vector::MaskedLoadOp::create(b, vt, a.getBuffer(), ValueRange{at}, mask, constant(b, vt, 0))};
  }
};

class StoreLowering final : public HostPattern<tile::StoreOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::StoreOp, Adaptor a, ImplicitLocOpBuilder &b) const override {
    memref::StoreOp::create(b, a.getValue(), a.getBuffer(), ValueRange{toIndex(b, a.getOffset())});
    return Values{};
  }
};

class StoreTileLowering final : public HostPattern<tile::StoreTileOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::StoreTileOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    if (!HostTiles::wide(op.getValue())) {
      vector::StoreOp::create(b, a.getValue(), a.getBuffer(), ValueRange{toIndex(b, a.getOffset())});
      return Values{};
    }
    HostTiles &tiles = kernel_.tiles;
    tiles.forPieces(b, HostTiles::lanes(op.getValue()), HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
      vector::StoreOp::create(b, tiles.pieceOf(b, op.getValue(), a.getValue(), at, n), a.getBuffer(),
                              ValueRange{arith::AddIOp::create(b, toIndex(b, a.getOffset()), at).getResult()});
    });
    return Values{};
  }
};

// A masked gather (masked-off lanes 0, no memory touched), piece by piece where wide.
// n lanes: buf[offsets[i]] where mask[i], else 0 (load_gather's and load_rows' one gather; c0 the
// index 0).
mlir::Value gatherLanes(ImplicitLocOpBuilder &b, mlir::Value buf, mlir::Value c0, mlir::Value offsets,
                        mlir::Value mask, mlir::Type elem, int64_t n) {
  auto vt = VectorType::get({n}, elem);
  return vector::GatherOp::create(b, vt, buf, ValueRange{c0}, offsets, mask, constant(b, vt, 0));
}

class LoadGatherLowering final : public HostPattern<tile::LoadGatherOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::LoadGatherOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    mlir::Value c0 = arith::ConstantIndexOp::create(b, 0);
    auto gather = [&](mlir::Value offsets, mlir::Value mask, int64_t n) {
      return gatherLanes(b, a.getBuffer(), c0, offsets, mask, cast<ShapedType>(op.getType()).getElementType(), n);
    };
    if (!anyWide(op))
      return Values{gather(a.getOffsets(), a.getMask(), HostTiles::lanes(op.getResult()))};
    HostTiles &tiles = kernel_.tiles;
    mlir::Value out = tiles.newBuffer(b, op.getResult());
    tiles.forPieces(b, HostTiles::lanes(op.getResult()), HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
      tiles.storePiece(b, out, cast<ShapedType>(op.getType()).getElementType(), at,
                       gather(tiles.pieceOf(b, op.getOffsets(), a.getOffsets(), at, n),
                              tiles.pieceOf(b, op.getMask(), a.getMask(), at, n), n));
    });
    return Values{out};
  }
};

// A gather of each row's lanes (the host has no per-thread rows to load whole): offsets
// starts[l / W] + l % W, mask l % W < counts[l / W]; a wide tile a piece of whole rows at a time.
class LoadRowsLowering final : public HostPattern<tile::LoadRowsOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::LoadRowsOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    const int64_t lanes = HostTiles::lanes(op.getResult()), rows = HostTiles::lanes(op.getStarts());
    const int64_t width = lanes / rows;
    mlir::Type elem = cast<ShapedType>(op.getType()).getElementType();
    if (width > HostTiles::kPiece || HostTiles::kPiece % width != 0)
      return kernel_.fail(op, fmt::format("host: load.rows of rows of {} lanes (a divisor of {})", width,
                                          HostTiles::kPiece));
    // Rows [0, n / width) of the given starts and counts (n lanes).
    auto gather = [&](mlir::Value starts, mlir::Value counts, int64_t n) -> mlir::Value {
      SmallVector<int64_t> rowOf, inRow;
      for (int64_t l = 0; l < n; ++l) {
        rowOf.push_back(l / width);
        inRow.push_back(l % width);
      }
      auto spread = [&](mlir::Value perRow) { return vector::ShuffleOp::create(b, perRow, perRow, rowOf); };
      auto i64s = VectorType::get({n}, b.getI64Type());
      mlir::Value k = arith::ConstantOp::create(b, DenseElementsAttr::get(i64s, ArrayRef<int64_t>(inRow)));
      mlir::Value offsets = arith::AddIOp::create(b, spread(starts), k);
      mlir::Value mask = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, k, spread(counts));
      return gatherLanes(b, a.getBuffer(), arith::ConstantIndexOp::create(b, 0), offsets, mask, elem, n);
    };
    if (!anyWide(op))
      return Values{gather(a.getStarts(), a.getCounts(), lanes)};
    HostTiles &tiles = kernel_.tiles;
    mlir::Value out = tiles.newBuffer(b, op.getResult());
    tiles.forPieces(b, lanes, HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
      mlir::Value row = arith::DivUIOp::create(b, at, arith::ConstantIndexOp::create(b, width));
      tiles.storePiece(b, out, elem, at,
                       gather(tiles.pieceOf(b, op.getStarts(), a.getStarts(), row, n / width),
                              tiles.pieceOf(b, op.getCounts(), a.getCounts(), row, n / width), n));
    });
    return Values{out};
  }
};

class StoreScatterLowering final : public HostPattern<tile::StoreScatterOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::StoreScatterOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    if (!anyWide(op)) {
      vector::ScatterOp::create(b, mlir::Type(), a.getBuffer(), ValueRange{arith::ConstantIndexOp::create(b, 0)},
                                a.getOffsets(), a.getMask(), a.getValue());
      return Values{};
    }
    HostTiles &tiles = kernel_.tiles;
    mlir::Value c0 = arith::ConstantIndexOp::create(b, 0);
    tiles.forPieces(b, HostTiles::lanes(op.getValue()), HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
      vector::ScatterOp::create(b, mlir::Type(), a.getBuffer(), ValueRange{c0},
                                tiles.pieceOf(b, op.getOffsets(), a.getOffsets(), at, n),
                                tiles.pieceOf(b, op.getMask(), a.getMask(), at, n),
                                tiles.pieceOf(b, op.getValue(), a.getValue(), at, n));
    });
    return Values{};
  }
};

// A program is one thread: the fences only keep the compiler from moving memory across (the
// system scope, which the host's programs share).
class AtomicAddLowering final : public HostPattern<tile::AtomicAddOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::AtomicAddOp, Adaptor a, ImplicitLocOpBuilder &b) const override {
    LLVM::FenceOp::create(b, LLVM::AtomicOrdering::release, "");
    mlir::Value old = memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::addi, a.getValue(), a.getBuffer(),
                                                  ValueRange{toIndex(b, a.getOffset())})
                          .getResult();
    LLVM::FenceOp::create(b, LLVM::AtomicOrdering::acquire, "");
    return Values{old};
  }
};

// Orderings the host has already: it starts no kernel's programs before the kernel ahead of it has
// ended (grid_await, grid_release), and one thread runs a program, its loads and stores in program
// order (program_sync). Nothing to emit.
template <typename OrderOp>
class AlreadyOrderedLowering final : public HostPattern<OrderOp> {
  using HostPattern<OrderOp>::HostPattern;
  FailureOr<Values> lower(OrderOp, typename OrderOp::Adaptor, ImplicitLocOpBuilder &) const override { return Values{}; }
};

// ---- decode_nvfp4, dot_tiles ----

// SPEC §2 in target-neutral arith; wide, a loop over kPiece-element pieces (half as many packed
// bytes, a scale a 16).
class DecodeNvfp4Lowering final : public HostPattern<tile::DecodeNvfp4Op> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::DecodeNvfp4Op op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    const int64_t N = HostTiles::lanes(op.getResult());
    if (N <= HostTiles::kPiece)
      return Values{decodeNvfp4Exact(b, a.getPacked(), a.getScales())};
    HostTiles &tiles = kernel_.tiles;
    mlir::Type i8 = b.getI8Type();
    mlir::Value sp = tiles.buffer(b, a.getPacked()), ss = tiles.buffer(b, a.getScales()), out = tiles.entryAlloca(b, N, i8);
    tiles.forPieces(b, N, HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
      mlir::Value p = vector::LoadOp::create(b, VectorType::get({n / 2}, i8), sp,
                                             ValueRange{arith::DivUIOp::create(b, at, arith::ConstantIndexOp::create(b, 2))});
      mlir::Value sc = vector::LoadOp::create(b, VectorType::get({(n + 15) / 16}, i8), ss,
                                              ValueRange{arith::DivUIOp::create(b, at, arith::ConstantIndexOp::create(b, 16))});
      vector::StoreOp::create(b, arith::BitcastOp::create(b, VectorType::get({n}, i8), decodeNvfp4Exact(b, p, sc)), out,
                              ValueRange{at});
    });
    return Values{tiles.result(b, op.getResult(), out)};
  }
};

// Per row of a (widened once) a loop over b's widened rows (HostKernelState::widenRows).
class DotTilesLowering final : public HostPattern<tile::DotTilesOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::DotTilesOp op, Adaptor a, ImplicitLocOpBuilder &b) const override {
    HostTiles &tiles = kernel_.tiles;
    const int64_t k = static_cast<int64_t>(op.getK());
    auto widened = kernel_.widenedRows.find(op.getRhs());
    mlir::Value sb = widened != kernel_.widenedRows.end() ? widened->second
                                                          : kernel_.widenRows(b, op.getRhs(), a.getRhs(), k);
    mlir::Type aElem = cast<ShapedType>(op.getLhs().getType()).getElementType();
    const int64_t M = HostTiles::lanes(op.getLhs()) / k, N = HostTiles::lanes(op.getRhs()) / k;
    mlir::Type f32 = b.getF32Type();
    mlir::Value sa = tiles.buffer(b, a.getLhs()), res = tiles.entryAlloca(b, N * M, f32);
    mlir::Value ck = arith::ConstantIndexOp::create(b, k), cM = arith::ConstantIndexOp::create(b, M);
    auto vk = VectorType::get({k}, f32);
    auto overM = tiles.rolledLoop(b, 0, M);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(overM.getBody()->getTerminator());
      mlir::Value m = overM.getInductionVar();
      mlir::Value rowA = toF32(b, tiles.loadPiece(b, sa, aElem, arith::MulIOp::create(b, m, ck), k));
      auto overN = tiles.rolledLoop(b, 0, N);
      b.setInsertionPoint(overN.getBody()->getTerminator());
      mlir::Value n = overN.getInductionVar();
      mlir::Value rowB = vector::LoadOp::create(b, vk, sb, ValueRange{arith::MulIOp::create(b, n, ck)});
      mlir::Value d = vector::ReductionOp::create(b, vector::CombiningKind::ADD, arith::MulFOp::create(b, rowA, rowB),
                                                  mlir::Value(), arith::FastMathFlags::reassoc);
      memref::StoreOp::create(b, d, res, ValueRange{arith::AddIOp::create(b, arith::MulIOp::create(b, n, cM), m)});
    }
    return Values{tiles.result(b, op.getResult(), res)};
  }
};

// A staged loop's hand-over: the host runs the roles trip by trip, so its values as made.
class StageLowering final : public HostPattern<tile::StageOp> {
  using HostPattern::HostPattern;
  FailureOr<Values> lower(tile::StageOp, Adaptor a, ImplicitLocOpBuilder &) const override {
    return Values(a.getValues());
  }
};

} // namespace

void populateHostOpPatterns(const HostTypeConverter &converter, RewritePatternSet &patterns, HostKernelState &kernel) {
  patterns.add<ElementwiseOnTiles, ExtractLowering, ExtractAtLowering, ShuffleLowering, ReduceAddLowering,
               ReduceMaxLowering, DotLowering, ReduceMaxGroupsLowering, FoldMaxLowering, LoadLowering,
               LoadTileLowering, LoadTileMaskedLowering, LoadGatherLowering, LoadRowsLowering, StoreLowering, StoreTileLowering,
               StoreScatterLowering, AtomicAddLowering, AlreadyOrderedLowering<tile::GridAwaitOp>,
               AlreadyOrderedLowering<tile::GridReleaseOp>, AlreadyOrderedLowering<tile::ProgramSyncOp>,
               DecodeNvfp4Lowering, DotTilesLowering, StageLowering>(converter, patterns.getContext(), kernel);
}

} // namespace m3idx::lowering
