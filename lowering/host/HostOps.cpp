// The host form's ops on wide tiles (HostProgram.h): each a loop over HostTiles::kPiece-lane
// pieces, the op's common lowering emitted once on a piece where it is elementwise.
#include "lowering/host/HostProgram.h"

#include <limits>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace m3idx::lowering {

using namespace mlir;

namespace {

bool isElementwise(OpKind k) {
  switch (k) {
  case OpKind::ConstInt: case OpKind::ConstFloat: case OpKind::Iota: case OpKind::Splat:
  case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::DivS: case OpKind::RemS:
  case OpKind::MinS: case OpKind::MaxS: case OpKind::MaxNumF: case OpKind::And: case OpKind::Or:
  case OpKind::Xor: case OpKind::Shl: case OpKind::ShrU: case OpKind::CmpEq: case OpKind::CmpNe:
  case OpKind::CmpLtS: case OpKind::CmpLeS: case OpKind::CmpGtS: case OpKind::CmpGeS:
  case OpKind::CmpGtU: case OpKind::CmpUnordF: case OpKind::CmpEqF: case OpKind::Select:
  case OpKind::ExtS: case OpKind::ExtU: case OpKind::Trunc: case OpKind::SIToFP: case OpKind::ExtF:
  case OpKind::TruncF: case OpKind::Bitcast: case OpKind::ClampF: case OpKind::PackScoreKey:
    return true;
  default:
    return false;
  }
}

} // namespace

void HostProgram::beginFunction(mlir::Block *entry) {
  tiles_.beginFunction(entry);
  module_ = entry->getParentOp()->getParentOfType<ModuleOp>();
  for (const dsl::Op &op : k_.ops)
    if (op.kind == OpKind::DotTiles)
      dotB_[op.operands[1].id] = op.intAttr;
}

// A dot.tiles b operand: widened once, where it is defined.
void HostProgram::defined(const dsl::Op &op) {
  for (dsl::ValueId v : op.results)
    if (auto it = dotB_.find(v.id); it != dotB_.end())
      dotStage_[v.id] = widenRows(v, it->second);
}

bool HostProgram::ownsOp(const dsl::Op &op) const {
  switch (op.kind) {
  case OpKind::For: case OpKind::If: case OpKind::Yield: case OpKind::DotTiles: case OpKind::DecodeNvfp4:
    return true;
  default:
    break;
  }
  for (dsl::ValueId v : op.operands)
    if (tiles_.wide(v))
      return true;
  for (dsl::ValueId v : op.results)
    if (tiles_.wide(v))
      return true;
  return false;
}

void HostProgram::elementwise(const dsl::Op &op) {
  const dsl::ValueId result = op.results[0];
  const dsl::Type rt = k_.typeOf(result);
  if (op.kind == OpKind::Bitcast && tiles_.storage(rt.elem) == tiles_.storage(k_.typeOf(op.operands[0]).elem)) {
    tiles_.wideBuf_[result.id] = tiles_.buffer(op.operands[0]); // same bytes: one buffer, never written again
    return;
  }
  std::vector<dsl::ValueId> tiles;
  for (dsl::ValueId v : op.operands)
    if (k_.typeOf(v).isTile())
      tiles.push_back(v);
  const bool uniform = op.kind == OpKind::Splat || op.kind == OpKind::ConstInt || op.kind == OpKind::ConstFloat ||
                       op.kind == OpKind::Iota;
  if (uniform) // pieces are made where they are used, so LLVM sees constants (a divisor, a mask) as such
    tiles_.splats_[result.id] = static_cast<int32_t>(&op - k_.ops.data());
  mlir::Value out = tiles_.newBuffer(result); // for ops that read the tile from memory
  tiles_.forPieces(rt.lanes, HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
    e_.setPieceView({rt.lanes, n});
    for (dsl::ValueId v : tiles)
      values_[v.id] = tiles_.pieceOf(v, at, n);
    mlir::Value piece;
    if (uniform) {
      piece = tiles_.pieceOf(result, at, n);
    } else {
      e_.emitOp(op); // the op's own lowering, on pieces (the piece view types its tiles)
      piece = values_[result.id];
    }
    tiles_.storePiece(out, rt.elem, at, piece);
    e_.setPieceView({});
    for (dsl::ValueId v : tiles)
      values_[v.id] = {};
    values_[result.id] = {};
  });
}

// Wide reductions fold pieces elementwise into the first piece, then reduce it: the same set of
// values as one reduction (fmaxf drops NaN either way; sums may be in any order, SPEC §4).
void HostProgram::reduce(const dsl::Op &op) {
  const dsl::Type t = k_.typeOf(op.operands[0]);
  const bool isF = t.elem == Elem::F32, add = op.kind == OpKind::ReduceAdd || op.kind == OpKind::Dot;
  auto pieceAt = [&](mlir::Value at, int64_t n) {
    mlir::Value v = tiles_.pieceOf(op.operands[0], at, n);
    if (op.kind == OpKind::Dot)
      v = arith::MulFOp::create(b_, v, tiles_.pieceOf(op.operands[1], at, n));
    return v;
  };
  auto combine = [&](mlir::Value x, mlir::Value y) -> mlir::Value {
    if (add)
      return isF ? mlir::Value(arith::AddFOp::create(b_, x, y, arith::FastMathFlags::reassoc))
                 : mlir::Value(arith::AddIOp::create(b_, x, y));
    return isF ? e_.maxNum(x, y) : mlir::Value(arith::MaxSIOp::create(b_, x, y));
  };
  mlir::Value c0 = arith::ConstantIndexOp::create(b_, 0), cP = arith::ConstantIndexOp::create(b_, HostTiles::kPiece);
  const int64_t full = t.lanes / HostTiles::kPiece, tail = t.lanes % HostTiles::kPiece;
  auto loop = tiles_.rolledLoop(1, full, ValueRange{pieceAt(c0, HostTiles::kPiece)});
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToEnd(loop.getBody());
    mlir::Value at = arith::MulIOp::create(b_, loop.getInductionVar(), cP);
    scf::YieldOp::create(b_, ValueRange{combine(loop.getRegionIterArgs()[0], pieceAt(at, HostTiles::kPiece))});
  }
  vector::CombiningKind kind = add ? vector::CombiningKind::ADD
                               : isF ? vector::CombiningKind::MAXNUMF
                                     : vector::CombiningKind::MAXSI;
  auto fm = isF && add ? arith::FastMathFlags::reassoc : arith::FastMathFlags::none;
  mlir::Value r = vector::ReductionOp::create(b_, kind, loop.getResult(0), mlir::Value(), fm);
  if (tail > 0)
    r = combine(r, vector::ReductionOp::create(b_, kind, pieceAt(arith::ConstantIndexOp::create(b_, t.lanes - tail), tail),
                                               mlir::Value(), fm));
  values_[op.results[0].id] = r;
}

// One reduction per group of lanes / groups lanes, into a buffer of the group maxima.
void HostProgram::reduceMaxGroups(const dsl::Op &op) {
  const int64_t lanes = k_.typeOf(op.operands[0]).lanes, groups = op.intAttr, S = lanes / groups;
  mlir::Type f32 = b_.getF32Type();
  if (S > HostTiles::kPiece) {
    e_.fail(fmt::format("host: reduce.max.groups of {} lanes per group (at most {})", S, HostTiles::kPiece));
    values_[op.results[0].id] = constant(b_, e_.valueType(op.results[0]), 0);
    return;
  }
  mlir::Value in = tiles_.buffer(op.operands[0]), out = tiles_.entryAlloca(groups, f32);
  mlir::Value negInf = constant(b_, f32, -std::numeric_limits<double>::infinity());
  auto loop = tiles_.rolledLoop(0, groups);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    mlir::Value g = loop.getInductionVar();
    mlir::Value first = arith::MulIOp::create(b_, g, arith::ConstantIndexOp::create(b_, S));
    mlir::Value piece = vector::LoadOp::create(b_, VectorType::get({S}, f32), in, ValueRange{first});
    mlir::Value best = vector::ReductionOp::create(b_, vector::CombiningKind::MAXNUMF, piece, negInf,
                                                   arith::FastMathFlags::none);
    memref::StoreOp::create(b_, best, out, ValueRange{g});
  }
  tiles_.setResult(op.results[0], out);
}

// Lanes i (bit d clear) and i + d: within pieces when a piece holds whole pairs' spans (2d
// divides it), else one output lane per trip.
void HostProgram::foldMax(const dsl::Op &op) {
  const int64_t lanes = k_.typeOf(op.operands[0]).lanes, d = op.intAttr;
  mlir::Type f32 = b_.getF32Type();
  mlir::Value in = tiles_.buffer(op.operands[0]), out = tiles_.entryAlloca(lanes / 2, f32);
  mlir::Value c2 = arith::ConstantIndexOp::create(b_, 2);
  if (HostTiles::kPiece % (2 * d) == 0) {
    tiles_.forPieces(lanes, HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
      mlir::Value v = vector::LoadOp::create(b_, VectorType::get({n}, f32), in, ValueRange{at});
      SmallVector<int64_t> low, high;
      for (int64_t i = 0; i < n; ++i)
        if ((i & d) == 0) {
          low.push_back(i);
          high.push_back(i + d);
        }
      mlir::Value m = e_.maxNum(vector::ShuffleOp::create(b_, v, v, low), vector::ShuffleOp::create(b_, v, v, high));
      vector::StoreOp::create(b_, m, out, ValueRange{arith::DivUIOp::create(b_, at, c2)});
    });
  } else {
    auto loop = tiles_.rolledLoop(0, lanes / 2);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    mlir::Value j = loop.getInductionVar(), cd = arith::ConstantIndexOp::create(b_, d);
    mlir::Value i = arith::AddIOp::create(
        b_, arith::MulIOp::create(b_, arith::DivUIOp::create(b_, j, cd), arith::ConstantIndexOp::create(b_, 2 * d)),
        arith::RemUIOp::create(b_, j, cd));
    mlir::Value lo = memref::LoadOp::create(b_, in, ValueRange{i});
    mlir::Value hi = memref::LoadOp::create(b_, in, ValueRange{arith::AddIOp::create(b_, i, cd)});
    memref::StoreOp::create(b_, e_.maxNum(lo, hi), out, ValueRange{j});
  }
  tiles_.setResult(op.results[0], out);
}

// Any lane permutation: one output lane per trip, its source lane read from a constant table.
void HostProgram::shuffle(const dsl::Op &op) {
  const dsl::Type t = k_.typeOf(op.operands[0]);
  const int64_t outLanes = static_cast<int64_t>(op.lanesAttr.size());
  mlir::Value a = tiles_.buffer(op.operands[0]), bb = tiles_.buffer(op.operands[1]);
  mlir::Type stored = tiles_.storage(t.elem), i32 = b_.getI32Type();
  auto tableType = MemRefType::get({outLanes}, i32);
  std::string name = fmt::format("m3idx_shuffle_{}", shuffleTables_++);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(module_.getBody());
    memref::GlobalOp::create(b_, name, b_.getStringAttr("private"), tableType,
                             DenseElementsAttr::get(RankedTensorType::get({outLanes}, i32),
                                                    ArrayRef<int32_t>(op.lanesAttr)),
                             /*constant=*/true, /*alignment=*/nullptr);
  }
  mlir::Value table = memref::GetGlobalOp::create(b_, tableType, name);
  mlir::Value out = tiles_.entryAlloca(outLanes, stored);
  auto loop = tiles_.rolledLoop(0, outLanes);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    mlir::Value j = loop.getInductionVar();
    mlir::Value src = arith::IndexCastOp::create(b_, b_.getIndexType(), memref::LoadOp::create(b_, table, ValueRange{j}));
    src = arith::MaxSIOp::create(b_, src, arith::ConstantIndexOp::create(b_, 0)); // -1: any lane
    mlir::Value cL = arith::ConstantIndexOp::create(b_, t.lanes);
    mlir::Value fromA = arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, src, cL);
    auto pick = scf::IfOp::create(b_, TypeRange{stored}, fromA, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard inner(b_);
      b_.setInsertionPointToEnd(pick.thenBlock());
      scf::YieldOp::create(b_, ValueRange{memref::LoadOp::create(b_, a, ValueRange{src})});
      b_.setInsertionPointToEnd(pick.elseBlock());
      scf::YieldOp::create(
          b_, ValueRange{memref::LoadOp::create(b_, bb, ValueRange{arith::SubIOp::create(b_, src, cL)})});
    }
    memref::StoreOp::create(b_, pick.getResult(0), out, ValueRange{j});
  }
  tiles_.setResult(op.results[0], out);
}

void HostProgram::memoryOp(const dsl::Op &op) {
  mlir::Value buf = e_.bufferArg(op.intAttr);
  auto offsetBy = [&](mlir::Value off, mlir::Value at) {
    return arith::AddIOp::create(b_, toIndex(b_, off), at).getResult();
  };
  switch (op.kind) {
  case OpKind::LoadTile: case OpKind::LoadTileMasked: {
    const dsl::Type t = k_.typeOf(op.results[0]);
    mlir::Value out = tiles_.newBuffer(op.results[0]);
    mlir::Type e = elemType(b_, t.elem);
    mlir::Value limit = op.kind == OpKind::LoadTileMasked
                            ? mlir::Value(toIndex(b_, arith::MinSIOp::create(b_, e_.get(op.operands[1]),
                                                                         constant(b_, b_.getI64Type(), t.lanes))))
                            : mlir::Value();
    tiles_.forPieces(t.lanes, HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
      auto vt = VectorType::get({n}, e);
      mlir::Value from = offsetBy(e_.get(op.operands[0]), at);
      mlir::Value piece;
      if (!limit) {
        piece = vector::LoadOp::create(b_, vt, buf, ValueRange{from});
      } else { // lanes [at, limit) of this piece: a mask of clamp(limit - at, 0, n)
        mlir::Value count = arith::MinSIOp::create(
            b_, arith::MaxSIOp::create(b_, arith::SubIOp::create(b_, limit, at), arith::ConstantIndexOp::create(b_, 0)),
            arith::ConstantIndexOp::create(b_, n));
        mlir::Value mask = vector::CreateMaskOp::create(b_, VectorType::get({n}, b_.getI1Type()), ValueRange{count});
        piece = vector::MaskedLoadOp::create(b_, vt, buf, ValueRange{from}, mask, constant(b_, vt, 0));
      }
      tiles_.storePiece(out, t.elem, at, piece);
    });
    return;
  }
  case OpKind::StoreTile: {
    const dsl::Type t = k_.typeOf(op.operands[1]);
    tiles_.forPieces(t.lanes, HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
      vector::StoreOp::create(b_, tiles_.pieceOf(op.operands[1], at, n), buf, ValueRange{offsetBy(e_.get(op.operands[0]), at)});
    });
    return;
  }
  case OpKind::StoreScatter: { // operands: offsets, values, mask
    const dsl::Type t = k_.typeOf(op.operands[1]);
    mlir::Value c0 = arith::ConstantIndexOp::create(b_, 0);
    tiles_.forPieces(t.lanes, HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
      vector::ScatterOp::create(b_, mlir::Type(), buf, ValueRange{c0},
                                tiles_.pieceOf(op.operands[0], at, n), tiles_.pieceOf(op.operands[2], at, n),
                                tiles_.pieceOf(op.operands[1], at, n));
    });
    return;
  }
  default:
    break;
  }
}

// Wide decodes run as a loop over HostTiles::kPiece-element pieces (half as many packed bytes, a scale a 16).
void HostProgram::decodeWide(const dsl::Op &op) {
  const int64_t P = k_.typeOf(op.operands[0]).lanes, N = 2 * P;
  if (N <= HostTiles::kPiece) {
    values_[op.results[0].id] = decodeNvfp4Exact(b_, e_.get(op.operands[0]), e_.get(op.operands[1]));
    return;
  }
  mlir::Type i8 = b_.getI8Type();
  mlir::Value sp = tiles_.buffer(op.operands[0]), ss = tiles_.buffer(op.operands[1]), out = tiles_.entryAlloca(N, i8);
  tiles_.forPieces(N, HostTiles::kPiece, [&](mlir::Value at, int64_t n) {
    mlir::Value p = vector::LoadOp::create(b_, VectorType::get({n / 2}, i8), sp,
                                           ValueRange{arith::DivUIOp::create(b_, at, arith::ConstantIndexOp::create(b_, 2))});
    mlir::Value sc = vector::LoadOp::create(b_, VectorType::get({(n + 15) / 16}, i8), ss,
                                            ValueRange{arith::DivUIOp::create(b_, at, arith::ConstantIndexOp::create(b_, 16))});
    vector::StoreOp::create(b_, arith::BitcastOp::create(b_, VectorType::get({n}, i8), decodeNvfp4Exact(b_, p, sc)),
                            out, ValueRange{at});
  });
  tiles_.setResult(op.results[0], out);
}

// b's rows widened to f32 into stack scratch (done once where b is defined when b is a dot.tiles
// operand: the query tile, loop-invariant in the score kernels).
mlir::Value HostProgram::widenRows(dsl::ValueId v, int64_t k) {
  const dsl::Type t = k_.typeOf(v);
  const int64_t N = t.lanes / k;
  mlir::Type f32 = b_.getF32Type();
  mlir::Value raw = tiles_.buffer(v), wide = tiles_.entryAlloca(N * k, f32);
  auto loop = tiles_.rolledLoop(0, N);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPoint(loop.getBody()->getTerminator());
  mlir::Value at = arith::MulIOp::create(b_, loop.getInductionVar(), arith::ConstantIndexOp::create(b_, k));
  vector::StoreOp::create(b_, toF32(b_, tiles_.loadPiece(raw, t.elem, at, k)), wide, ValueRange{at});
  return wide;
}

// Per row of a (widened once) a loop over b's widened rows.
void HostProgram::dotTiles(const dsl::Op &op) {
  const int64_t k = op.intAttr;
  const dsl::ValueId aId = op.operands[0], bId = op.operands[1];
  mlir::Value sb = dotStage_.count(bId.id) ? dotStage_[bId.id] : widenRows(bId, k);
  const dsl::Type at = k_.typeOf(aId);
  const int64_t M = at.lanes / k, N = k_.typeOf(bId).lanes / k;
  mlir::Type f32 = b_.getF32Type();
  mlir::Value sa = tiles_.buffer(aId), res = tiles_.entryAlloca(N * M, f32);
  mlir::Value ck = arith::ConstantIndexOp::create(b_, k), cM = arith::ConstantIndexOp::create(b_, M);
  auto vk = VectorType::get({k}, f32);
  auto overM = tiles_.rolledLoop(0, M);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(overM.getBody()->getTerminator());
    mlir::Value m = overM.getInductionVar();
    mlir::Value rowA = toF32(b_, tiles_.loadPiece(sa, at.elem, arith::MulIOp::create(b_, m, ck), k));
    auto overN = tiles_.rolledLoop(0, N);
    b_.setInsertionPoint(overN.getBody()->getTerminator());
    mlir::Value n = overN.getInductionVar();
    mlir::Value rowB = vector::LoadOp::create(b_, vk, sb, ValueRange{arith::MulIOp::create(b_, n, ck)});
    mlir::Value d = vector::ReductionOp::create(b_, vector::CombiningKind::ADD,
                                                arith::MulFOp::create(b_, rowA, rowB), mlir::Value(),
                                                arith::FastMathFlags::reassoc);
    memref::StoreOp::create(b_, d, res,
                            ValueRange{arith::AddIOp::create(b_, arith::MulIOp::create(b_, n, cM), m)});
  }
  tiles_.setResult(op.results[0], res);
}

// Wide iter args are not carried by scf.for: each has a buffer the init is copied into and the
// body's yield copies into; the body reads it as the iter arg and the loop's result is it.
void HostProgram::emitFor(const dsl::Op &op) {
  const dsl::Region &r = op.regions[0];
  const size_t n = op.results.size();
  std::vector<mlir::Value> carried(n);
  SmallVector<mlir::Value> inits;
  for (size_t i = 0; i < n; ++i) {
    const dsl::ValueId init = op.operands[3 + i];
    if (!tiles_.wide(op.results[i])) {
      inits.push_back(e_.get(init));
      continue;
    }
    const dsl::Type t = k_.typeOf(op.results[i]);
    carried[i] = tiles_.entryAlloca(t.lanes, tiles_.storage(t.elem));
    tiles_.copy(carried[i], tiles_.buffer(init), t.lanes);
  }
  auto forOp = scf::ForOp::create(b_, toIndex(b_, e_.get(op.operands[0])), toIndex(b_, e_.get(op.operands[1])),
                                  toIndex(b_, e_.get(op.operands[2])), inits);
  {
    OpBuilder::InsertionGuard guard(b_);
    e_.openRegionBlock(forOp.getBody());
    values_[r.args[0].id] = arith::IndexCastOp::create(b_, b_.getI64Type(), forOp.getInductionVar());
    tiles_.bind(ArrayRef<dsl::ValueId>(r.args).drop_front(), carried, forOp.getRegionIterArgs());
    yieldTo_.push_back(carried);
    e_.emitRegion(r);
    yieldTo_.pop_back();
  }
  tiles_.bind(op.results, carried, forOp.getResults());
}

void HostProgram::emitIf(const dsl::Op &op) {
  const size_t n = op.results.size();
  std::vector<mlir::Value> joined(n);
  SmallVector<mlir::Type> types;
  for (size_t i = 0; i < n; ++i) {
    const dsl::Type t = k_.typeOf(op.results[i]);
    if (tiles_.wide(op.results[i]))
      joined[i] = tiles_.entryAlloca(t.lanes, tiles_.storage(t.elem));
    else
      types.push_back(e_.valueType(op.results[i]));
  }
  auto ifOp = scf::IfOp::create(b_, types, e_.get(op.operands[0]), /*withElseRegion=*/true);
  for (int r = 0; r < 2; ++r) {
    OpBuilder::InsertionGuard guard(b_);
    e_.openRegionBlock(r == 0 ? ifOp.thenBlock() : ifOp.elseBlock());
    yieldTo_.push_back(joined);
    e_.emitRegion(op.regions[r]);
    yieldTo_.pop_back();
  }
  tiles_.bind(op.results, joined, ifOp.getResults());
}

void HostProgram::emitYield(const dsl::Op &op) {
  const std::vector<mlir::Value> none;
  const std::vector<mlir::Value> &to = yieldTo_.empty() ? none : yieldTo_.back();
  // Sources first: one that is another position's target (a swap of iter args) is copied aside
  // before any target is written.
  std::vector<mlir::Value> from(op.operands.size());
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (i >= to.size() || !to[i])
      continue;
    from[i] = tiles_.buffer(op.operands[i]);
    for (size_t j = 0; j < to.size(); ++j)
      if (j != i && from[i] == to[j]) {
        const dsl::Type t = k_.typeOf(op.operands[i]);
        mlir::Value aside = tiles_.entryAlloca(t.lanes, tiles_.storage(t.elem));
        tiles_.copy(aside, from[i], t.lanes);
        from[i] = aside;
        break;
      }
  }
  SmallVector<mlir::Value> narrow;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (!from[i])
      narrow.push_back(e_.get(op.operands[i]));
    else if (from[i] != to[i])
      tiles_.copy(to[i], from[i], k_.typeOf(op.operands[i]).lanes);
  }
  scf::YieldOp::create(b_, narrow);
}

void HostProgram::emitOwnedOp(const dsl::Op &op) {
  auto set = [&](mlir::Value v) { values_[op.results[0].id] = v; };
  switch (op.kind) {
  case OpKind::For: emitFor(op); return;
  case OpKind::If: emitIf(op); return;
  case OpKind::Yield: emitYield(op); return;
  case OpKind::DotTiles: dotTiles(op); return;
  case OpKind::DecodeNvfp4: decodeWide(op); return;
  case OpKind::ReduceAdd: case OpKind::ReduceMax: case OpKind::Dot: reduce(op); return;
  case OpKind::ReduceMaxGroups: reduceMaxGroups(op); return;
  case OpKind::FoldMax: foldMax(op); return;
  case OpKind::Shuffle: shuffle(op); return;
  case OpKind::LoadTile: case OpKind::LoadTileMasked: case OpKind::StoreTile: case OpKind::StoreScatter:
    memoryOp(op);
    return;
  case OpKind::Extract: case OpKind::ExtractAt: {
    const dsl::Type t = k_.typeOf(op.operands[0]);
    mlir::Value at = op.kind == OpKind::Extract ? mlir::Value(arith::ConstantIndexOp::create(b_, op.intAttr))
                                                : toIndex(b_, e_.get(op.operands[1]));
    mlir::Value v = memref::LoadOp::create(b_, tiles_.buffer(op.operands[0]), ValueRange{at});
    if (t.elem == Elem::I1)
      v = arith::TruncIOp::create(b_, b_.getI1Type(), v);
    else if (t.elem == Elem::F8E4M3FN)
      v = arith::BitcastOp::create(b_, elemType(b_, t.elem), v);
    set(v);
    return;
  }
  default:
    break;
  }
  if (isElementwise(op.kind)) {
    elementwise(op);
    return;
  }
  e_.fail(fmt::format("host: {} has no lowering for tiles of more than {} lanes", dsl::opName(op.kind), HostTiles::kPiece));
}

} // namespace m3idx::lowering
