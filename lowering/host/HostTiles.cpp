// Host lowering of tiles wider than kHostPiece lanes. Each such tile lives in a stack buffer of
// its own, and every op on it is a loop over kHostPiece-lane pieces emitted once, so code size
// and compile time do not grow with tile widths. (LLVM's X86 back end spends time superlinear in
// the size of one basic block: a straight-line 8192-lane tile, or a 2048-byte masked load that a
// machine without AVX-512 scalarizes into 2048 branches, took seconds to minutes to compile.)
//
// Invariants: a wide value is written once, where it is defined, into hostWideBuf_[id]; a loop-
// carried or branch-yielded wide value has a buffer of its own that the region's yield copies into;
// small floats and i1 are stored as bytes (no memref of f8 or i1 reaches LLVM, and i1 vectors
// would be bit-packed in memory while scalar i1 accesses are byte-sized).
#include "lowering/EmitterImpl.h"

#include <functional>
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

bool Emitter::hostWide(dsl::ValueId v) const {
  const dsl::Type t = k_.typeOf(v);
  return t.isTile() && t.lanes > kHostPiece;
}

bool Emitter::hostOwns(const dsl::Op &op) const {
  switch (op.kind) {
  case OpKind::For: case OpKind::If: case OpKind::Yield: case OpKind::DotTiles: case OpKind::DecodeNvfp4:
    return true;
  default:
    break;
  }
  for (dsl::ValueId v : op.operands)
    if (hostWide(v))
      return true;
  for (dsl::ValueId v : op.results)
    if (hostWide(v))
      return true;
  return false;
}

// Loops over pieces stay rolled whatever LLVM's unroller would judge of their constant trip
// counts: code size must not grow with the tile.
scf::ForOp Emitter::hostRolledLoop(int64_t lo, int64_t hi, ValueRange inits) {
  auto loop = scf::ForOp::create(b_, arith::ConstantIndexOp::create(b_, lo), arith::ConstantIndexOp::create(b_, hi),
                                 arith::ConstantIndexOp::create(b_, 1), inits);
  auto unroll = LLVM::LoopUnrollAttr::get(b_.getContext(), /*disable=*/b_.getBoolAttr(true), {}, {}, {}, {}, {}, {});
  // scf-to-cf carries this attribute to the loop's latch branch, where LLVM reads it.
  loop->setAttr("llvm.loop_annotation", LLVM::LoopAnnotationAttr::get(b_.getContext(), {}, {}, {}, unroll, {}, {}, {},
                                                                       {}, {}, {}, {}, {}, {}, {}, {}));
  return loop;
}

mlir::Type Emitter::hostStorage(Elem e) {
  switch (e) {
  case Elem::I1: case Elem::F8E4M3FN: case Elem::F4E2M1FN: return b_.getI8Type();
  default: return elemType(e);
  }
}

mlir::Value Emitter::hostNewBuffer(dsl::ValueId v) {
  const dsl::Type t = k_.typeOf(v);
  mlir::Value buf = entryAlloca(t.lanes, hostStorage(t.elem));
  hostWideBuf_[v.id] = buf;
  return buf;
}

mlir::Value Emitter::hostBuffer(dsl::ValueId v) {
  if (hostWide(v)) {
    auto it = hostWideBuf_.find(v.id);
    if (it != hostWideBuf_.end())
      return it->second;
    fail(fmt::format("host: wide tile %{} used before it is defined", v.id));
    return entryAlloca(k_.typeOf(v).lanes, hostStorage(k_.typeOf(v).elem));
  }
  const dsl::Type t = k_.typeOf(v);
  mlir::Value buf = entryAlloca(t.lanes, hostStorage(t.elem));
  hostStorePiece(buf, t.elem, arith::ConstantIndexOp::create(b_, 0), get(v));
  return buf;
}

mlir::Value Emitter::hostLoadPiece(mlir::Value buf, Elem e, mlir::Value at, int64_t lanes) {
  mlir::Value v = vector::LoadOp::create(b_, VectorType::get({lanes}, hostStorage(e)), buf, ValueRange{at});
  switch (e) {
  case Elem::I1: return arith::TruncIOp::create(b_, VectorType::get({lanes}, b_.getI1Type()), v);
  case Elem::F8E4M3FN: case Elem::F4E2M1FN:
    if (e == Elem::F4E2M1FN)
      fail("host: wide f4E2M1FN tiles are not stored");
    return arith::BitcastOp::create(b_, VectorType::get({lanes}, elemType(Elem::F8E4M3FN)), v);
  default: return v;
  }
}

void Emitter::hostStorePiece(mlir::Value buf, Elem e, mlir::Value at, mlir::Value piece) {
  auto vt = cast<VectorType>(piece.getType());
  mlir::Type bytes = vt.clone(b_.getI8Type());
  if (e == Elem::I1)
    piece = arith::ExtUIOp::create(b_, bytes, piece);
  else if (e == Elem::F8E4M3FN || e == Elem::F4E2M1FN)
    piece = arith::BitcastOp::create(b_, bytes, piece);
  vector::StoreOp::create(b_, piece, buf, ValueRange{at});
}

mlir::Value Emitter::hostLoadWhole(mlir::Value buf, dsl::ValueId v) {
  const dsl::Type t = k_.typeOf(v);
  return hostLoadPiece(buf, t.elem, arith::ConstantIndexOp::create(b_, 0), t.lanes);
}

mlir::Value Emitter::hostPieceOf(dsl::ValueId v, mlir::Value at, int64_t n) {
  const dsl::Type t = k_.typeOf(v);
  auto it = hostSplats_.find(v.id);
  if (it == hostSplats_.end())
    return hostLoadPiece(hostBuffer(v), t.elem, at, n);
  auto vt = VectorType::get({n}, elemType(t.elem));
  const dsl::Op &def = k_.ops[it->second];
  switch (def.kind) {
  case OpKind::Splat: return vector::BroadcastOp::create(b_, vt, get(def.operands[0]));
  case OpKind::ConstInt: return constant(vt, static_cast<double>(def.intAttr));
  case OpKind::ConstFloat: return constant(vt, def.floatAttr);
  default: { // iota: lanes [at, at + n)
    SmallVector<int64_t> lanes;
    for (int64_t i = 0; i < n; ++i)
      lanes.push_back(i);
    mlir::Value base = arith::ConstantOp::create(b_, DenseElementsAttr::get(vt, ArrayRef<int64_t>(lanes)));
    return arith::AddIOp::create(
        b_, base, vector::BroadcastOp::create(b_, vt, arith::IndexCastOp::create(b_, elemType(t.elem), at)));
  }
  }
}

void Emitter::hostSetResult(dsl::ValueId v, mlir::Value buf) {
  if (hostWide(v))
    hostWideBuf_[v.id] = buf;
  else
    values_[v.id] = hostLoadWhole(buf, v);
}

void Emitter::hostForPieces(int64_t lanes, int64_t piece,
                            const std::function<void(mlir::Value, int64_t)> &body) {
  if (const int64_t full = lanes / piece; full > 0) {
    auto loop = hostRolledLoop(0, full);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    body(arith::MulIOp::create(b_, loop.getInductionVar(), arith::ConstantIndexOp::create(b_, piece)), piece);
  }
  if (const int64_t tail = lanes % piece; tail > 0)
    body(arith::ConstantIndexOp::create(b_, lanes - tail), tail);
}

void Emitter::hostCopy(mlir::Value dst, mlir::Value src, int64_t lanes) {
  mlir::Type e = cast<MemRefType>(src.getType()).getElementType();
  hostForPieces(lanes, kHostPiece, [&](mlir::Value at, int64_t n) {
    vector::StoreOp::create(b_, vector::LoadOp::create(b_, VectorType::get({n}, e), src, ValueRange{at}), dst,
                            ValueRange{at});
  });
}

void Emitter::hostElementwise(const dsl::Op &op) {
  const dsl::ValueId result = op.results[0];
  const dsl::Type rt = k_.typeOf(result);
  if (op.kind == OpKind::Bitcast && hostStorage(rt.elem) == hostStorage(k_.typeOf(op.operands[0]).elem)) {
    hostWideBuf_[result.id] = hostBuffer(op.operands[0]); // same bytes: one buffer, never written again
    return;
  }
  std::vector<dsl::ValueId> tiles;
  for (dsl::ValueId v : op.operands)
    if (k_.typeOf(v).isTile())
      tiles.push_back(v);
  const bool uniform = op.kind == OpKind::Splat || op.kind == OpKind::ConstInt || op.kind == OpKind::ConstFloat ||
                       op.kind == OpKind::Iota;
  if (uniform) // pieces are made where they are used, so LLVM sees constants (a divisor, a mask) as such
    hostSplats_[result.id] = static_cast<int32_t>(&op - k_.ops.data());
  mlir::Value out = hostNewBuffer(result); // for ops that read the tile from memory
  hostForPieces(rt.lanes, kHostPiece, [&](mlir::Value at, int64_t n) {
    hostPiece_ = {rt.lanes, n};
    for (dsl::ValueId v : tiles)
      values_[v.id] = hostPieceOf(v, at, n);
    mlir::Value piece;
    if (uniform) {
      piece = hostPieceOf(result, at, n);
    } else {
      emitOp(op); // the op's own lowering, on pieces (hostPiece_ types its tiles)
      piece = values_[result.id];
    }
    hostStorePiece(out, rt.elem, at, piece);
    hostPiece_ = {};
    for (dsl::ValueId v : tiles)
      values_[v.id] = {};
    values_[result.id] = {};
  });
}

// Wide reductions fold pieces elementwise into the first piece, then reduce it: the same set of
// values as one reduction (fmaxf drops NaN either way; sums may be in any order, SPEC §4).
void Emitter::hostReduce(const dsl::Op &op) {
  const dsl::Type t = k_.typeOf(op.operands[0]);
  const bool isF = t.elem == Elem::F32, add = op.kind == OpKind::ReduceAdd || op.kind == OpKind::Dot;
  auto pieceAt = [&](mlir::Value at, int64_t n) {
    mlir::Value v = hostPieceOf(op.operands[0], at, n);
    if (op.kind == OpKind::Dot)
      v = arith::MulFOp::create(b_, v, hostPieceOf(op.operands[1], at, n));
    return v;
  };
  auto combine = [&](mlir::Value x, mlir::Value y) -> mlir::Value {
    if (add)
      return isF ? mlir::Value(arith::AddFOp::create(b_, x, y, arith::FastMathFlags::reassoc))
                 : mlir::Value(arith::AddIOp::create(b_, x, y));
    return isF ? maxNum(x, y) : mlir::Value(arith::MaxSIOp::create(b_, x, y));
  };
  mlir::Value c0 = arith::ConstantIndexOp::create(b_, 0), cP = arith::ConstantIndexOp::create(b_, kHostPiece);
  const int64_t full = t.lanes / kHostPiece, tail = t.lanes % kHostPiece;
  auto loop = hostRolledLoop(1, full, ValueRange{pieceAt(c0, kHostPiece)});
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToEnd(loop.getBody());
    mlir::Value at = arith::MulIOp::create(b_, loop.getInductionVar(), cP);
    scf::YieldOp::create(b_, ValueRange{combine(loop.getRegionIterArgs()[0], pieceAt(at, kHostPiece))});
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
void Emitter::hostReduceMaxGroups(const dsl::Op &op) {
  const int64_t lanes = k_.typeOf(op.operands[0]).lanes, groups = op.intAttr, S = lanes / groups;
  mlir::Type f32 = b_.getF32Type();
  if (S > kHostPiece) {
    fail(fmt::format("host: reduce.max.groups of {} lanes per group (at most {})", S, kHostPiece));
    values_[op.results[0].id] = constant(valueType(op.results[0]), 0);
    return;
  }
  mlir::Value in = hostBuffer(op.operands[0]), out = entryAlloca(groups, f32);
  mlir::Value negInf = constant(f32, -std::numeric_limits<double>::infinity());
  auto loop = hostRolledLoop(0, groups);
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
  hostSetResult(op.results[0], out);
}

// Lanes i (bit d clear) and i + d: within pieces when a piece holds whole pairs' spans (2d
// divides it), else one output lane per trip.
void Emitter::hostFoldMax(const dsl::Op &op) {
  const int64_t lanes = k_.typeOf(op.operands[0]).lanes, d = op.intAttr;
  mlir::Type f32 = b_.getF32Type();
  mlir::Value in = hostBuffer(op.operands[0]), out = entryAlloca(lanes / 2, f32);
  mlir::Value c2 = arith::ConstantIndexOp::create(b_, 2);
  if (kHostPiece % (2 * d) == 0) {
    hostForPieces(lanes, kHostPiece, [&](mlir::Value at, int64_t n) {
      mlir::Value v = vector::LoadOp::create(b_, VectorType::get({n}, f32), in, ValueRange{at});
      SmallVector<int64_t> low, high;
      for (int64_t i = 0; i < n; ++i)
        if ((i & d) == 0) {
          low.push_back(i);
          high.push_back(i + d);
        }
      mlir::Value m = maxNum(vector::ShuffleOp::create(b_, v, v, low), vector::ShuffleOp::create(b_, v, v, high));
      vector::StoreOp::create(b_, m, out, ValueRange{arith::DivUIOp::create(b_, at, c2)});
    });
  } else {
    auto loop = hostRolledLoop(0, lanes / 2);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    mlir::Value j = loop.getInductionVar(), cd = arith::ConstantIndexOp::create(b_, d);
    mlir::Value i = arith::AddIOp::create(
        b_, arith::MulIOp::create(b_, arith::DivUIOp::create(b_, j, cd), arith::ConstantIndexOp::create(b_, 2 * d)),
        arith::RemUIOp::create(b_, j, cd));
    mlir::Value lo = memref::LoadOp::create(b_, in, ValueRange{i});
    mlir::Value hi = memref::LoadOp::create(b_, in, ValueRange{arith::AddIOp::create(b_, i, cd)});
    memref::StoreOp::create(b_, maxNum(lo, hi), out, ValueRange{j});
  }
  hostSetResult(op.results[0], out);
}

// Any lane permutation: one output lane per trip, its source lane read from a constant table.
void Emitter::hostShuffle(const dsl::Op &op) {
  const dsl::Type t = k_.typeOf(op.operands[0]);
  const int64_t outLanes = static_cast<int64_t>(op.lanesAttr.size());
  mlir::Value a = hostBuffer(op.operands[0]), bb = hostBuffer(op.operands[1]);
  mlir::Type stored = hostStorage(t.elem), i32 = b_.getI32Type();
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
  mlir::Value out = entryAlloca(outLanes, stored);
  auto loop = hostRolledLoop(0, outLanes);
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
  hostSetResult(op.results[0], out);
}

void Emitter::hostMemoryOp(const dsl::Op &op) {
  mlir::Value buf = buffers_[op.intAttr];
  auto offsetBy = [&](mlir::Value off, mlir::Value at) {
    return arith::AddIOp::create(b_, toIndex(off), at).getResult();
  };
  switch (op.kind) {
  case OpKind::LoadTile: case OpKind::LoadTileMasked: {
    const dsl::Type t = k_.typeOf(op.results[0]);
    mlir::Value out = hostNewBuffer(op.results[0]);
    mlir::Type e = elemType(t.elem);
    mlir::Value limit = op.kind == OpKind::LoadTileMasked
                            ? mlir::Value(toIndex(arith::MinSIOp::create(b_, get(op.operands[1]),
                                                                         constant(b_.getI64Type(), t.lanes))))
                            : mlir::Value();
    hostForPieces(t.lanes, kHostPiece, [&](mlir::Value at, int64_t n) {
      auto vt = VectorType::get({n}, e);
      mlir::Value from = offsetBy(get(op.operands[0]), at);
      mlir::Value piece;
      if (!limit) {
        piece = vector::LoadOp::create(b_, vt, buf, ValueRange{from});
      } else { // lanes [at, limit) of this piece: a mask of clamp(limit - at, 0, n)
        mlir::Value count = arith::MinSIOp::create(
            b_, arith::MaxSIOp::create(b_, arith::SubIOp::create(b_, limit, at), arith::ConstantIndexOp::create(b_, 0)),
            arith::ConstantIndexOp::create(b_, n));
        mlir::Value mask = vector::CreateMaskOp::create(b_, VectorType::get({n}, b_.getI1Type()), ValueRange{count});
        piece = vector::MaskedLoadOp::create(b_, vt, buf, ValueRange{from}, mask, constant(vt, 0));
      }
      hostStorePiece(out, t.elem, at, piece);
    });
    return;
  }
  case OpKind::StoreTile: {
    const dsl::Type t = k_.typeOf(op.operands[1]);
    hostForPieces(t.lanes, kHostPiece, [&](mlir::Value at, int64_t n) {
      vector::StoreOp::create(b_, hostPieceOf(op.operands[1], at, n), buf, ValueRange{offsetBy(get(op.operands[0]), at)});
    });
    return;
  }
  case OpKind::StoreScatter: { // operands: offsets, values, mask
    const dsl::Type t = k_.typeOf(op.operands[1]);
    mlir::Value c0 = arith::ConstantIndexOp::create(b_, 0);
    hostForPieces(t.lanes, kHostPiece, [&](mlir::Value at, int64_t n) {
      vector::ScatterOp::create(b_, mlir::Type(), buf, ValueRange{c0},
                                hostPieceOf(op.operands[0], at, n), hostPieceOf(op.operands[2], at, n),
                                hostPieceOf(op.operands[1], at, n));
    });
    return;
  }
  default:
    break;
  }
}

// Wide decodes run as a loop over kHostPiece-element pieces (half as many packed bytes, a scale a 16).
void Emitter::hostDecodeNvfp4(const dsl::Op &op) {
  const int64_t P = k_.typeOf(op.operands[0]).lanes, N = 2 * P;
  if (N <= kHostPiece) {
    values_[op.results[0].id] = emitDecodeNvfp4(get(op.operands[0]), get(op.operands[1]));
    return;
  }
  mlir::Type i8 = b_.getI8Type();
  mlir::Value sp = hostBuffer(op.operands[0]), ss = hostBuffer(op.operands[1]), out = entryAlloca(N, i8);
  hostForPieces(N, kHostPiece, [&](mlir::Value at, int64_t n) {
    mlir::Value p = vector::LoadOp::create(b_, VectorType::get({n / 2}, i8), sp,
                                           ValueRange{arith::DivUIOp::create(b_, at, arith::ConstantIndexOp::create(b_, 2))});
    mlir::Value sc = vector::LoadOp::create(b_, VectorType::get({(n + 15) / 16}, i8), ss,
                                            ValueRange{arith::DivUIOp::create(b_, at, arith::ConstantIndexOp::create(b_, 16))});
    vector::StoreOp::create(b_, arith::BitcastOp::create(b_, VectorType::get({n}, i8), emitDecodeNvfp4(p, sc)), out,
                            ValueRange{at});
  });
  hostSetResult(op.results[0], out);
}

// b's rows widened to f32 into stack scratch (done once where b is defined when b is a dot.tiles
// operand: the query tile, loop-invariant in the score kernels).
mlir::Value Emitter::hostWidenRows(dsl::ValueId v, int64_t k) {
  const dsl::Type t = k_.typeOf(v);
  const int64_t N = t.lanes / k;
  mlir::Type f32 = b_.getF32Type();
  mlir::Value raw = hostBuffer(v), wide = entryAlloca(N * k, f32);
  auto loop = hostRolledLoop(0, N);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPoint(loop.getBody()->getTerminator());
  mlir::Value at = arith::MulIOp::create(b_, loop.getInductionVar(), arith::ConstantIndexOp::create(b_, k));
  vector::StoreOp::create(b_, toF32(hostLoadPiece(raw, t.elem, at, k)), wide, ValueRange{at});
  return wide;
}

// Per row of a (widened once) a loop over b's widened rows.
void Emitter::hostDotTiles(const dsl::Op &op) {
  const int64_t k = op.intAttr;
  const dsl::ValueId aId = op.operands[0], bId = op.operands[1];
  mlir::Value sb = dotStage_.count(bId.id) ? dotStage_[bId.id] : hostWidenRows(bId, k);
  const dsl::Type at = k_.typeOf(aId);
  const int64_t M = at.lanes / k, N = k_.typeOf(bId).lanes / k;
  mlir::Type f32 = b_.getF32Type();
  mlir::Value sa = hostBuffer(aId), res = entryAlloca(N * M, f32);
  mlir::Value ck = arith::ConstantIndexOp::create(b_, k), cM = arith::ConstantIndexOp::create(b_, M);
  auto vk = VectorType::get({k}, f32);
  auto overM = hostRolledLoop(0, M);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(overM.getBody()->getTerminator());
    mlir::Value m = overM.getInductionVar();
    mlir::Value rowA = toF32(hostLoadPiece(sa, at.elem, arith::MulIOp::create(b_, m, ck), k));
    auto overN = hostRolledLoop(0, N);
    b_.setInsertionPoint(overN.getBody()->getTerminator());
    mlir::Value n = overN.getInductionVar();
    mlir::Value rowB = vector::LoadOp::create(b_, vk, sb, ValueRange{arith::MulIOp::create(b_, n, ck)});
    mlir::Value d = vector::ReductionOp::create(b_, vector::CombiningKind::ADD,
                                                arith::MulFOp::create(b_, rowA, rowB), mlir::Value(),
                                                arith::FastMathFlags::reassoc);
    memref::StoreOp::create(b_, d, res,
                            ValueRange{arith::AddIOp::create(b_, arith::MulIOp::create(b_, n, cM), m)});
  }
  hostSetResult(op.results[0], res);
}

// ids[i] names buffers[i] where there is one (a wide value), else the next of `narrow`.
void Emitter::hostBind(ArrayRef<dsl::ValueId> ids, const std::vector<mlir::Value> &buffers, ValueRange narrow) {
  for (size_t i = 0, j = 0; i < ids.size(); ++i) {
    if (buffers[i])
      hostWideBuf_[ids[i].id] = buffers[i];
    else
      values_[ids[i].id] = narrow[j++];
  }
}

// Wide iter args are not carried by scf.for: each has a buffer the init is copied into and the
// body's yield copies into; the body reads it as the iter arg and the loop's result is it.
void Emitter::hostFor(const dsl::Op &op) {
  const dsl::Region &r = op.regions[0];
  const size_t n = op.results.size();
  std::vector<mlir::Value> carried(n);
  SmallVector<mlir::Value> inits;
  for (size_t i = 0; i < n; ++i) {
    const dsl::ValueId init = op.operands[3 + i];
    if (!hostWide(op.results[i])) {
      inits.push_back(get(init));
      continue;
    }
    const dsl::Type t = k_.typeOf(op.results[i]);
    carried[i] = entryAlloca(t.lanes, hostStorage(t.elem));
    hostCopy(carried[i], hostBuffer(init), t.lanes);
  }
  auto forOp = scf::ForOp::create(b_, toIndex(get(op.operands[0])), toIndex(get(op.operands[1])),
                                  toIndex(get(op.operands[2])), inits);
  {
    OpBuilder::InsertionGuard guard(b_);
    openRegionBlock(forOp.getBody());
    values_[r.args[0].id] = arith::IndexCastOp::create(b_, b_.getI64Type(), forOp.getInductionVar());
    hostBind(ArrayRef<dsl::ValueId>(r.args).drop_front(), carried, forOp.getRegionIterArgs());
    hostYieldTo_.push_back(carried);
    emitRegion(r);
    hostYieldTo_.pop_back();
  }
  hostBind(op.results, carried, forOp.getResults());
}

void Emitter::hostIf(const dsl::Op &op) {
  const size_t n = op.results.size();
  std::vector<mlir::Value> joined(n);
  SmallVector<mlir::Type> types;
  for (size_t i = 0; i < n; ++i) {
    const dsl::Type t = k_.typeOf(op.results[i]);
    if (hostWide(op.results[i]))
      joined[i] = entryAlloca(t.lanes, hostStorage(t.elem));
    else
      types.push_back(valueType(op.results[i]));
  }
  auto ifOp = scf::IfOp::create(b_, types, get(op.operands[0]), /*withElseRegion=*/true);
  for (int r = 0; r < 2; ++r) {
    OpBuilder::InsertionGuard guard(b_);
    openRegionBlock(r == 0 ? ifOp.thenBlock() : ifOp.elseBlock());
    hostYieldTo_.push_back(joined);
    emitRegion(op.regions[r]);
    hostYieldTo_.pop_back();
  }
  hostBind(op.results, joined, ifOp.getResults());
}

void Emitter::hostYield(const dsl::Op &op) {
  const std::vector<mlir::Value> none;
  const std::vector<mlir::Value> &to = hostYieldTo_.empty() ? none : hostYieldTo_.back();
  // Sources first: one that is another position's target (a swap of iter args) is copied aside
  // before any target is written.
  std::vector<mlir::Value> from(op.operands.size());
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (i >= to.size() || !to[i])
      continue;
    from[i] = hostBuffer(op.operands[i]);
    for (size_t j = 0; j < to.size(); ++j)
      if (j != i && from[i] == to[j]) {
        const dsl::Type t = k_.typeOf(op.operands[i]);
        mlir::Value aside = entryAlloca(t.lanes, hostStorage(t.elem));
        hostCopy(aside, from[i], t.lanes);
        from[i] = aside;
        break;
      }
  }
  SmallVector<mlir::Value> narrow;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (!from[i])
      narrow.push_back(get(op.operands[i]));
    else if (from[i] != to[i])
      hostCopy(to[i], from[i], k_.typeOf(op.operands[i]).lanes);
  }
  scf::YieldOp::create(b_, narrow);
}

void Emitter::emitHostOp(const dsl::Op &op) {
  auto set = [&](mlir::Value v) { values_[op.results[0].id] = v; };
  switch (op.kind) {
  case OpKind::For: hostFor(op); return;
  case OpKind::If: hostIf(op); return;
  case OpKind::Yield: hostYield(op); return;
  case OpKind::DotTiles: hostDotTiles(op); return;
  case OpKind::DecodeNvfp4: hostDecodeNvfp4(op); return;
  case OpKind::ReduceAdd: case OpKind::ReduceMax: case OpKind::Dot: hostReduce(op); return;
  case OpKind::ReduceMaxGroups: hostReduceMaxGroups(op); return;
  case OpKind::FoldMax: hostFoldMax(op); return;
  case OpKind::Shuffle: hostShuffle(op); return;
  case OpKind::LoadTile: case OpKind::LoadTileMasked: case OpKind::StoreTile: case OpKind::StoreScatter:
    hostMemoryOp(op);
    return;
  case OpKind::Extract: case OpKind::ExtractAt: {
    const dsl::Type t = k_.typeOf(op.operands[0]);
    mlir::Value at = op.kind == OpKind::Extract ? mlir::Value(arith::ConstantIndexOp::create(b_, op.intAttr))
                                                : toIndex(get(op.operands[1]));
    mlir::Value v = memref::LoadOp::create(b_, hostBuffer(op.operands[0]), ValueRange{at});
    if (t.elem == Elem::I1)
      v = arith::TruncIOp::create(b_, b_.getI1Type(), v);
    else if (t.elem == Elem::F8E4M3FN)
      v = arith::BitcastOp::create(b_, elemType(t.elem), v);
    set(v);
    return;
  }
  default:
    break;
  }
  if (isElementwise(op.kind)) {
    hostElementwise(op);
    return;
  }
  fail(fmt::format("host: {} has no lowering for tiles of more than {} lanes", dsl::opName(op.kind), kHostPiece));
}

} // namespace m3idx::lowering
