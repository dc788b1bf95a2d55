// The GPU form of the DSL (see MlirEmitter.h): a program is a CTA of threads_ threads; a tile
// is spread blocked over them; cross-lane ops become warp shuffles or go through a workgroup
// buffer between barriers; scalars are uniform.
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>

#include "core/Nvfp4.h"
#include "core/Spec.h"
#include "lowering/EmitterImpl.h"
#include "lowering/Layouts.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"

namespace m3idx::lowering {

using namespace mlir;


mlir::Value Emitter::laneI64() { return arith::IndexCastOp::create(b_, b_.getI64Type(), lane_); }

mlir::Value Emitter::warpLaneI64() {
  const int width = target_.shuffleWidth(threads_);
  return width == threads_ ? laneI64() : arith::RemUIOp::create(b_, laneI64(), constant(b_.getI64Type(), width));
}

mlir::Value Emitter::laneBelow(int64_t n) {
  return arith::CmpIOp::create(b_, arith::CmpIPredicate::ult, laneI64(),
                               constant(b_.getI64Type(), static_cast<double>(n)));
}

// gpu.shuffle moves 32-bit values: narrower values are widened, i64 goes as two halves. Shuffles
// stay inside a warp: in programs of several warps an indexed one (whose source may be in another
// warp) is refused.
mlir::Value Emitter::shuffleIdx(mlir::Value v, mlir::Value srcLane) {
  if (threads_ > target_.shuffleWidth(threads_))
    fail(fmt::format("a lane shuffle across the warps of a {}-thread program", threads_));
  mlir::Value width = constant(b_.getI32Type(), target_.shuffleWidth(threads_));
  mlir::Value src = arith::TruncIOp::create(b_, b_.getI32Type(), srcLane);
  auto move32 = [&](mlir::Value x) {
    return gpu::ShuffleOp::create(b_, x.getType(), b_.getI1Type(), x, src, width,
                                  gpu::ShuffleModeAttr::get(b_.getContext(), gpu::ShuffleMode::IDX))
        .getShuffleResult();
  };
  mlir::Type t = v.getType();
  if (t.isF32() || t.isInteger(32))
    return move32(v);
  if (t.isInteger(64)) {
    mlir::Value lo = move32(arith::TruncIOp::create(b_, b_.getI32Type(), v));
    mlir::Value hi = move32(arith::TruncIOp::create(
        b_, b_.getI32Type(), arith::ShRUIOp::create(b_, v, constant(t, 32))));
    return arith::OrIOp::create(
        b_, arith::ShLIOp::create(b_, arith::ExtUIOp::create(b_, t, hi), constant(t, 32)),
        arith::ExtUIOp::create(b_, t, lo));
  }
  return arith::TruncIOp::create(b_, t, move32(arith::ExtUIOp::create(b_, b_.getI32Type(), v)));
}

void Emitter::barrier() { target_.barrier(b_, threads_); }

mlir::Value Emitter::shuffleXor(mlir::Value v, int32_t mask) {
  const int width = target_.shuffleWidth(threads_);
  if (mask >= width)
    fail(fmt::format("a lane shuffle across the warps of a {}-thread program", threads_));
  auto op = gpu::ShuffleOp::create(b_, v, mask, width, gpu::ShuffleMode::XOR);
  return op.getShuffleResult();
}

// Reduces a distributed tile to a uniform scalar: within the thread, then a butterfly over the
// warp. Lanes a partial tile does not have contribute the identity.
mlir::Value Emitter::warpReduce(mlir::Value perThread, int64_t lanes, bool add, bool isFloat) {
  mlir::Type e = getElementTypeOrSelf(perThread.getType());
  vector::CombiningKind kind = add ? vector::CombiningKind::ADD
                               : isFloat ? vector::CombiningKind::MAXNUMF
                                         : vector::CombiningKind::MAXSI;
  mlir::Value s = vector::ReductionOp::create(b_, kind, perThread, mlir::Value(),
                                              isFloat ? arith::FastMathFlags::reassoc
                                                      : arith::FastMathFlags::none);
  if (!e.isF32() && !e.isInteger(32)) {
    fail("a GPU reduction over a tile of a type other than i32 or f32");
    return s;
  }
  mlir::Value identity =
      add ? constant(e, 0.0)
          : isFloat ? constant(e, -std::numeric_limits<double>::infinity())
                    : constant(e, static_cast<double>(INT32_MIN));
  if (partial(lanes))
    s = arith::SelectOp::create(b_, laneBelow(lanes), s, identity);
  for (int32_t off = threads_ / 2; off >= 1; off /= 2) {
    mlir::Value other = shuffleXor(s, off);
    s = add ? (isFloat ? mlir::Value(arith::AddFOp::create(b_, s, other))
                       : mlir::Value(arith::AddIOp::create(b_, s, other)))
            : (isFloat ? maxNum(s, other)
                       : mlir::Value(arith::MaxSIOp::create(b_, s, other)));
  }
  return s;
}

mlir::Value Emitter::gpuExtract(mlir::Value t, int64_t tileLanes, int64_t lane) {
  const int64_t k = chunk(tileLanes);
  mlir::Value mine = vector::ExtractOp::create(b_, t, ArrayRef<int64_t>{partial(tileLanes) ? 0 : lane % k});
  return shuffleIdx(mine, constant(b_.getI64Type(), static_cast<double>(partial(tileLanes) ? lane : lane / k)));
}

// Lane `lane` (a per-thread value) of a distributed tile: every register a holder may keep it in is
// shuffled from its holder, then the right one selected (shuffles need one register index for all
// threads).
mlir::Value Emitter::gpuExtractDynamic(mlir::Value t, int64_t tileLanes, mlir::Value lane) {
  const int64_t k = chunk(tileLanes);
  mlir::Type i64 = b_.getI64Type();
  mlir::Value holder = partial(tileLanes) ? lane : arith::DivSIOp::create(b_, lane, constant(i64, k));
  mlir::Value reg = partial(tileLanes) ? constant(i64, 0) : arith::RemSIOp::create(b_, lane, constant(i64, k));
  mlir::Value result;
  for (int64_t j = 0; j < k; ++j) {
    mlir::Value v = shuffleIdx(vector::ExtractOp::create(b_, t, ArrayRef<int64_t>{j}), holder);
    result = j == 0 ? v
                    : mlir::Value(arith::SelectOp::create(
                          b_, arith::CmpIOp::create(b_, arith::CmpIPredicate::eq, reg, constant(i64, j)),
                          v, result));
  }
  return result;
}

mlir::Value Emitter::smemFor(dsl::Elem e) {
  return smem_.at(static_cast<int>(e == dsl::Elem::I1 ? dsl::Elem::I8 : e));
}

// A shuffle of one-lane-per-thread tiles in which every lane taken from an operand comes from the
// same distance (a shift, as in the top-k's insertion network) or from the lane xor one constant
// (a bitonic network's compare-exchange partner): one warp shuffle per operand (none for a splat,
// whose lanes are all equal, or a lane that stays in its thread) and a select, instead of a round
// trip through shared memory between two barriers. Null when the mask is of neither form.
mlir::Value Emitter::lanePermutation(mlir::Value a, mlir::Value b, int64_t lanes,
                                     ArrayRef<int32_t> mask, std::array<bool, 2> splat) {
  const int64_t outLanes = static_cast<int64_t>(mask.size());
  if (lanes > threads_ || outLanes > threads_ || threads_ > target_.shuffleWidth(threads_))
    return {};
  // Per operand: the lanes it feeds, and whether they all come from i + shift / from i ^ flip.
  struct Source {
    bool used = false, byShift = true, byXor = true;
    int64_t shift = 0, flip = 0;
  } src[2];
  uint32_t fromB = 0;
  for (int64_t i = 0; i < outLanes; ++i) {
    const int op = mask[i] >= lanes ? 1 : 0;
    const int64_t from = mask[i] % lanes;
    Source &s = src[op];
    if (!s.used) {
      s.used = true;
      s.shift = from - i;
      s.flip = from ^ i;
    }
    s.byShift = s.byShift && from - i == s.shift;
    s.byXor = s.byXor && (from ^ i) == s.flip;
    fromB |= static_cast<uint32_t>(op) << i;
  }
  for (const Source &s : src)
    if (s.used && !s.byShift && !s.byXor)
      return {};
  mlir::Type i64 = b_.getI64Type();
  auto take = [&](mlir::Value tile, int op) -> mlir::Value {
    mlir::Value v = vector::ExtractOp::create(b_, tile, ArrayRef<int64_t>{0});
    const Source &s = src[op];
    if (!s.used || splat[op] || (s.byShift && s.shift == 0))
      return v;
    if (s.byShift)
      return shuffleIdx(v, arith::AddIOp::create(b_, laneI64(), constant(i64, static_cast<double>(s.shift))));
    return shuffleIdx(v, arith::XOrIOp::create(b_, laneI64(), constant(i64, static_cast<double>(s.flip))));
  };
  mlir::Value va = take(a, 0), vb = take(b, 1), v;
  if (!src[1].used)
    v = va;
  else if (!src[0].used)
    v = vb;
  else {
    mlir::Value bit = arith::AndIOp::create(
        b_, arith::ShRUIOp::create(b_, constant(i64, static_cast<double>(fromB)), laneI64()), constant(i64, 1));
    v = arith::SelectOp::create(b_, arith::CmpIOp::create(b_, arith::CmpIPredicate::ne, bit, constant(i64, 0)),
                                vb, va);
  }
  return vector::BroadcastOp::create(b_, VectorType::get({1}, v.getType()), v);
}

bool Emitter::madeBySplat(dsl::ValueId v) const {
  const int32_t def = definingOp_[v.id];
  return def >= 0 && k_.ops[def].kind == OpKind::Splat;
}

// A general lane permutation through the workgroup buffer: all threads write their lanes of a and
// b, wait, read the lanes the mask names, wait (so the buffer can be reused).
mlir::Value Emitter::gpuShuffle(mlir::Value a, mlir::Value b, int64_t lanes, ArrayRef<int32_t> mask,
                                dsl::Elem elem, std::array<bool, 2> splat) {
  if (mlir::Value v = lanePermutation(a, b, lanes, mask, splat))
    return v;
  const bool isBool = elem == dsl::Elem::I1;
  mlir::Value buf = smemFor(elem);
  mlir::Type i64 = b_.getI64Type(), e = elemType(elem);
  mlir::Type stored = isBool ? b_.getI8Type() : e;
  const int64_t k = chunk(lanes);
  auto writeTile = [&](mlir::Value tile, int64_t base) {
    auto body = [&] {
      for (int64_t j = 0; j < k; ++j) {
        mlir::Value v = vector::ExtractOp::create(b_, tile, ArrayRef<int64_t>{j});
        if (isBool)
          v = arith::ExtUIOp::create(b_, stored, v);
        mlir::Value at = arith::AddIOp::create(
            b_, arith::MulIOp::create(b_, laneI64(), constant(i64, k)), constant(i64, base + j));
        memref::StoreOp::create(b_, v, buf, ValueRange{toIndex(at)});
      }
    };
    if (!partial(lanes))
      return body();
    auto guard = scf::IfOp::create(b_, TypeRange{}, laneBelow(lanes), false);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(guard.thenBlock()->getTerminator());
    body();
  };
  writeTile(a, 0);
  writeTile(b, lanes);
  barrier();
  const int64_t outLanes = static_cast<int64_t>(mask.size()), kOut = chunk(outLanes);
  SmallVector<int64_t> table(mask.begin(), mask.end());
  mlir::Value maskTable = arith::ConstantOp::create(
      b_, DenseElementsAttr::get(VectorType::get({outLanes}, i64), ArrayRef<int64_t>(table)));
  mlir::Value out = constant(VectorType::get({kOut}, e), 0);
  for (int64_t j = 0; j < kOut; ++j) {
    mlir::Value outLane = arith::AddIOp::create(
        b_, arith::MulIOp::create(b_, laneI64(), constant(i64, kOut)), constant(i64, j));
    if (partial(outLanes)) // threads past the tile read lane 0's source: in range, unused
      outLane = arith::SelectOp::create(b_, laneBelow(outLanes), outLane, constant(i64, 0));
    // Which source lane: a select chain for short masks (a dynamic index into a constant vector
    // would go through local memory), an indexed read of the table otherwise.
    mlir::Value src;
    if (outLanes <= threads_) {
      src = constant(i64, static_cast<double>(table[0]));
      for (int64_t m = 1; m < outLanes; ++m)
        src = arith::SelectOp::create(
            b_, arith::CmpIOp::create(b_, arith::CmpIPredicate::eq, outLane, constant(i64, m)),
            constant(i64, static_cast<double>(table[m])), src);
    } else {
      src = vector::ExtractOp::create(b_, maskTable, ArrayRef<OpFoldResult>{toIndex(outLane)});
    }
    mlir::Value v = memref::LoadOp::create(b_, buf, ValueRange{toIndex(src)});
    if (isBool)
      v = arith::TruncIOp::create(b_, e, v);
    out = vector::InsertOp::create(b_, v, out, ArrayRef<int64_t>{j});
  }
  barrier();
  return out;
}

mlir::Value Emitter::gpuLoadTile(mlir::Value buf, mlir::Value off, int64_t lanes, mlir::Type elem,
                                 int64_t alignBytes) {
  const int64_t k = chunk(lanes);
  auto vt = VectorType::get({k}, elem);
  mlir::Value at = arith::AddIOp::create(
      b_, off, arith::MulIOp::create(b_, laneI64(), constant(b_.getI64Type(), k)));
  // A thread's part starts k elements after its neighbour's: aligned to the smaller of the two.
  const int64_t partBytes = k * elem.getIntOrFloatBitWidth() / 8;
  const int64_t align = alignBytes ? std::min(alignBytes, partBytes & -partBytes) : 0;
  if (!partial(lanes))
    return vector::LoadOp::create(b_, vt, buf, ValueRange{toIndex(at)}, /*nontemporal=*/false,
                                  align ? llvm::MaybeAlign(align) : llvm::MaybeAlign());
  // An scf.if with results is built without terminators: each branch yields its value.
  auto guard = scf::IfOp::create(b_, TypeRange{vt}, laneBelow(lanes), true);
  {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToEnd(guard.thenBlock());
    scf::YieldOp::create(b_, ValueRange{vector::LoadOp::create(b_, vt, buf, ValueRange{toIndex(at)})});
    b_.setInsertionPointToEnd(guard.elseBlock());
    scf::YieldOp::create(b_, ValueRange{constant(vt, 0)});
  }
  return guard.getResult(0);
}

void Emitter::gpuStoreTile(mlir::Value buf, mlir::Value off, mlir::Value v, int64_t lanes) {
  const int64_t k = chunk(lanes);
  mlir::Value at = arith::AddIOp::create(
      b_, off, arith::MulIOp::create(b_, laneI64(), constant(b_.getI64Type(), k)));
  if (!partial(lanes)) {
    vector::StoreOp::create(b_, v, buf, ValueRange{toIndex(at)});
    return;
  }
  auto guard = scf::IfOp::create(b_, TypeRange{}, laneBelow(lanes), false);
  OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPoint(guard.thenBlock()->getTerminator());
  vector::StoreOp::create(b_, v, buf, ValueRange{toIndex(at)});
}

// Each thread stores its own lanes where their mask is set (and, in a tile narrower than the
// program, where it holds a lane at all).
void Emitter::gpuStoreScatter(mlir::Value buf, mlir::Value offsets, mlir::Value v, mlir::Value mask,
                              int64_t lanes) {
  const int64_t k = cast<VectorType>(v.getType()).getNumElements();
  for (int64_t j = 0; j < k; ++j) {
    mlir::Value on = vector::ExtractOp::create(b_, mask, ArrayRef<int64_t>{j});
    if (partial(lanes))
      on = arith::AndIOp::create(b_, on, laneBelow(lanes));
    auto guard = scf::IfOp::create(b_, TypeRange{}, on, false);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(guard.thenBlock()->getTerminator());
    memref::StoreOp::create(b_, vector::ExtractOp::create(b_, v, ArrayRef<int64_t>{j}), buf,
                            ValueRange{toIndex(vector::ExtractOp::create(b_, offsets, ArrayRef<int64_t>{j}))});
  }
}

// This thread's elements start at lane * perThread. Either they cover whole scale groups and the
// thread holds exactly their scales (checked when the decode was emitted), or perThread divides
// 16 and the one scale they share is held by another thread.
mlir::Value Emitter::gpuThreadScales(mlir::Value scales, int64_t perThread) {
  if (perThread >= 16)
    return scales;
  mlir::Type i64 = b_.getI64Type();
  mlir::Value s = gpuExtractDynamic(
      scales, scaleLanes_,
      arith::DivSIOp::create(b_, arith::MulIOp::create(b_, laneI64(), constant(i64, perThread)),
                             constant(i64, 16)));
  return vector::BroadcastOp::create(b_, VectorType::get({1}, b_.getI8Type()), s);
}

// Writes a dot.tiles b operand into its workgroup buffer (as f32, or as bytes for MFMA, whose
// B fragment is then read once into registers).
void Emitter::stageDotOperand(dsl::ValueId v, bool barrierBefore) {
  mlir::Value buf = stageBufs_[dotStageOf_[v.id]];
  const dsl::Type t = k_.typeOf(v);
  if (barrierBefore)
    barrier();
  mlir::Value val = get(v);
  const bool bytes = cast<MemRefType>(buf.getType()).getElementType().isInteger(8);
  if (bytes)
    val = arith::BitcastOp::create(b_, cast<VectorType>(val.getType()).clone(b_.getI8Type()), val);
  else
    val = toF32(val);
  dotStage_[v.id] = buf;
  if (program_->stageOwnLayout(v, buf, val))
    return;
  gpuStoreTile(buf, constant(b_.getI64Type(), 0), val, t.lanes);
  barrier();
  const int64_t rows = t.lanes / spec::kIndexHeadDim;
  if (bytes)
    program_->stageMatrixB(v, buf, rows);
}

// FFMA form: thread t holds ca consecutive lanes of a, i.e. a slice of one row m; it dots the
// slice with every row of the staged b, the g threads of a row sum their parts with xor
// shuffles, and the N x M results reach their owners through a workgroup buffer.
mlir::Value Emitter::gpuDotTiles(const dsl::Op &op) {
  if (DotUnit unit = program_->dotUnit(op); unit != DotUnit::Ffma)
    return program_->matrixDot(op, unit);
  const int64_t k = op.intAttr, aLanes = k_.typeOf(op.operands[0]).lanes;
  const int64_t M = aLanes / k, N = k_.typeOf(op.operands[1]).lanes / k, ca = chunk(aLanes);
  mlir::Type f32 = b_.getF32Type(), i64 = b_.getI64Type();
  const auto resultType = VectorType::get({chunk(N * M)}, f32);
  if (partial(aLanes) || k % ca != 0 || (k / ca) > threads_) {
    fail(fmt::format("dot.tiles: rows of {} lanes do not split evenly over the threads of a "
                           "tile of {} lanes",
                           k, aLanes));
    return constant(resultType, 0);
  }
  const int64_t g = k / ca; // threads per row of a
  if (!dotStage_.count(op.operands[1].id))
    stageDotOperand(op.operands[1], /*barrierBefore=*/true);
  mlir::Value staged = dotStage_[op.operands[1].id];
  const int32_t def = definingOp_[op.operands[0].id];
  mlir::Value a = def >= 0 && k_.ops[def].kind == OpKind::DecodeNvfp4 ? program_->keysF32(k_.ops[def]) : nullptr;
  if (!a) // else the decode itself becomes dead and is removed
    a = toF32(get(op.operands[0]));
  mlir::Value lane = laneI64();
  mlir::Value m = arith::DivSIOp::create(b_, lane, constant(i64, g));
  mlir::Value part = arith::RemSIOp::create(b_, lane, constant(i64, g));
  mlir::Value koff = arith::MulIOp::create(b_, part, constant(i64, ca));
  mlir::Value res = dotResult_.at(static_cast<int32_t>(&op - k_.ops.data()));
  for (int64_t n = 0; n < N; ++n) {
    mlir::Value at = arith::AddIOp::create(b_, koff, constant(i64, n * k));
    mlir::Value vb = vector::LoadOp::create(b_, VectorType::get({ca}, f32), staged, ValueRange{toIndex(at)});
    // Products of E4M3 values are exact in f32, so contracting them into FMAs changes nothing.
    auto fm = arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;
    mlir::Value s = vector::ReductionOp::create(b_, vector::CombiningKind::ADD,
                                                arith::MulFOp::create(b_, a, vb, fm), mlir::Value(), fm);
    for (int64_t off = g / 2; off >= 1; off /= 2)
      s = arith::AddFOp::create(b_, s, shuffleXor(s, static_cast<int32_t>(off)));
    // Thread (m, n % g) of the row's g threads writes result n.
    auto mine = scf::IfOp::create(
        b_, TypeRange{}, arith::CmpIOp::create(b_, arith::CmpIPredicate::eq, part, constant(i64, n % g)),
        false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(mine.thenBlock()->getTerminator());
    memref::StoreOp::create(b_, s, res,
                            ValueRange{toIndex(arith::AddIOp::create(b_, m, constant(i64, n * M)))});
  }
  barrier();
  mlir::Value out = gpuLoadTile(res, constant(i64, 0), N * M, f32);
  barrier(); // the buffer is written again by the next tile
  return out;
}

// Groups of S lanes: whole groups per thread reduce in registers; a group spread over several
// threads (consecutive ones, as tiles are blocked) reduces with xor shuffles, and output lane g
// comes from the group's first thread.
mlir::Value Emitter::gpuReduceMaxGroups(mlir::Value t, int64_t lanes, int64_t groups) {
  mlir::Type f32 = b_.getF32Type(), i64 = b_.getI64Type();
  const int64_t S = lanes / groups, c = chunk(lanes);
  const double ninf = -std::numeric_limits<double>::infinity();
  auto slice = [&](int64_t from, int64_t n) -> mlir::Value {
    if (n == 1) // a one-lane vector.reduction folds to arith.maxnumf, a libdevice call on NVVM
      return maxNum(vector::ExtractOp::create(b_, t, ArrayRef<int64_t>{from}), constant(f32, ninf));
    mlir::Value part = vector::ExtractStridedSliceOp::create(b_, t, ArrayRef<int64_t>{from},
                                                             ArrayRef<int64_t>{n}, ArrayRef<int64_t>{1});
    return vector::ReductionOp::create(b_, vector::CombiningKind::MAXNUMF, part,
                                       constant(f32, ninf), arith::FastMathFlags::none)
        .getResult();
  };
  if (!partial(lanes) && c >= S) {
    mlir::Value out = constant(VectorType::get({c / S}, f32), 0);
    for (int64_t g = 0; g < c / S; ++g)
      out = vector::InsertOp::create(b_, slice(g * S, S), out, ArrayRef<int64_t>{g});
    return out;
  }
  if (!partial(lanes) && S % c != 0) {
    fail(fmt::format("reduce.max.groups: groups of {} lanes do not align with {} lanes per "
                           "thread",
                           S, c));
    return constant(VectorType::get({chunk(groups)}, f32), 0);
  }
  const int64_t span = partial(lanes) ? S : S / c; // threads per group
  mlir::Value s = slice(0, c);
  if (partial(lanes))
    s = arith::SelectOp::create(b_, laneBelow(lanes), s, constant(f32, ninf));
  for (int64_t off = span / 2; off >= 1; off /= 2)
    s = maxNum(s, shuffleXor(s, static_cast<int32_t>(off)));
  mlir::Value src = arith::SelectOp::create(b_, laneBelow(groups),
                                            arith::MulIOp::create(b_, laneI64(), constant(i64, span)),
                                            constant(i64, 0));
  return vector::BroadcastOp::create(b_, VectorType::get({1}, f32), shuffleIdx(s, src));
}

Status Emitter::planProgram() {
  definingOp_.assign(k_.valueTypes.size(), -1);
  for (size_t i = 0; i < k_.ops.size(); ++i)
    for (dsl::ValueId r : k_.ops[i].results)
      definingOp_[r.id] = static_cast<int32_t>(i);
  M3IDX_RETURN_IF_ERROR(target_.checkProgram(k_));
  auto layouts = KernelLayouts::assign(k_, target_, threads_);
  if (!layouts.ok())
    return layouts.status();
  spread_ = (*layouts)->spreads();
  return Status();
}

mlir::MemRefType Emitter::workgroupBuffer(int64_t n, mlir::Type e) {
  auto workgroup = gpu::AddressSpaceAttr::get(b_.getContext(), gpu::AddressSpace::Workgroup);
  return MemRefType::get({n}, e, MemRefLayoutAttrInterface{}, workgroup);
}

StatusOr<Emitter::WorkgroupPlan> Emitter::planWorkgroupMemory() {
  WorkgroupPlan plan;
  // One workgroup buffer per element type a general shuffle moves, sized for the largest.
  for (const dsl::Op &op : k_.ops)
    if (op.kind == OpKind::Shuffle) {
      dsl::Type t = k_.typeOf(op.operands[0]);
      int e = static_cast<int>(t.elem == Elem::I1 ? Elem::I8 : t.elem);
      plan.shuffleLanes[e] = std::max<int64_t>(plan.shuffleLanes[e], 2 * t.lanes);
    }
  // dot.tiles: a buffer per distinct b operand (bytes for matrix units, else f32), and one for each
  // op's results unless they move by shuffles (MFMA) or stay in mma.sync or wgmma accumulators.
  using Role = WorkgroupPlan::Role;
  dotStageOf_.assign(k_.valueTypes.size(), -1);
  int64_t dotBytes = 0;
  auto fromDecode = [&](dsl::ValueId v) {
    return definingOp_[v.id] >= 0 && k_.ops[definingOp_[v.id]].kind == OpKind::DecodeNvfp4;
  };
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    const dsl::Op &op = k_.ops[i];
    if (op.kind == OpKind::ExtF && fromDecode(op.operands[0]))
      plan.keysAsF32 = true;
    if (op.kind != OpKind::DotTiles)
      continue;
    const int64_t k = op.intAttr, M = k_.typeOf(op.operands[0]).lanes / k;
    const int64_t bLanes = k_.typeOf(op.operands[1]).lanes, N = bLanes / k;
    const DotUnit unit = program_->dotUnit(op);
    M3IDX_RETURN_IF_ERROR(program_->checkDot(op, unit));
    plan.keysAsF32 |= unit == DotUnit::Ffma && fromDecode(op.operands[0]);
    StatusOr<TargetProgram::DotStaging> staging = program_->planDot(op, unit, bLanes);
    if (!staging.ok())
      return staging.status();
    auto add = [&](Role role, int32_t key, int64_t n, mlir::Type e, int64_t align = 0) {
      plan.dotBuffers.push_back({role, key, workgroupBuffer(n, e), align});
      dotBytes += n * e.getIntOrFloatBitWidth() / 8;
    };
    if (dotStageOf_[op.operands[1].id] < 0) {
      dotStageOf_[op.operands[1].id] = static_cast<int32_t>(stageCount_++);
      add(Role::StageB, op.operands[1].id, staging->elements,
          staging->bytes ? mlir::Type(b_.getI8Type()) : mlir::Type(b_.getF32Type()), staging->align);
    }
    if (!staging->resultInRegisters)
      add(Role::Result, static_cast<int32_t>(i), N * M, b_.getF32Type());
  }
  if (const int64_t floats = program_->exchangeFloats()) {
    plan.dotBuffers.push_back({Role::Exchange, 0, workgroupBuffer(floats, b_.getF32Type())});
    dotBytes += floats * 4;
  }
  if (dotBytes > kMaxDotWorkgroupBytes)
    return Status::error(fmt::format("kernel @{}: dot.tiles needs {} bytes of workgroup memory "
                                     "(at most {}): too many rows x heads for one GPU program",
                                     k_.name, dotBytes, kMaxDotWorkgroupBytes));
  // sm_90 decodes look their keys up in a table of key bytes per scale, built in shared memory
  // when the program starts (where only f32 keys are read, LLVM drops the unread table).
  plan.keyWords = target_.keyTables() && std::any_of(k_.ops.begin(), k_.ops.end(), [](const dsl::Op &op) {
    return op.kind == OpKind::DecodeNvfp4;
  });
  // A loop's carried values of a decode's packed-key type are key tiles loaded ahead (each costs
  // registers for its bytes until it is decoded).
  std::vector<dsl::Type> packedTypes;
  for (const dsl::Op &op : k_.ops)
    if (op.kind == OpKind::DecodeNvfp4)
      packedTypes.push_back(k_.typeOf(op.operands[0]));
  auto packed = [&](dsl::ValueId v) {
    return std::find(packedTypes.begin(), packedTypes.end(), k_.typeOf(v)) != packedTypes.end();
  };
  for (const dsl::Op &op : k_.ops)
    if (op.kind == OpKind::For && !op.regions.empty() && !op.regions[0].args.empty())
      plan.keyTilesInFlight = std::max<int64_t>(
          plan.keyTilesInFlight, std::count_if(op.regions[0].args.begin() + 1, op.regions[0].args.end(), packed));
  return plan;
}

gpu::GPUFuncOp Emitter::declareKernel(const WorkgroupPlan &plan) {
  SmallVector<mlir::Type> argTypes;
  for (const dsl::BufferArg &buf : k_.buffers)
    argTypes.push_back(MemRefType::get({ShapedType::kDynamic}, elemType(buf.elem)));
  for (const dsl::ScalarArgDecl &sc : k_.scalars)
    argTypes.push_back(elemType(sc.elem));
  SmallVector<mlir::Type> smemTypes;
  for (auto [e, n] : plan.shuffleLanes)
    smemTypes.push_back(workgroupBuffer(n, elemType(static_cast<Elem>(e))));
  for (const WorkgroupPlan::Buffer &pb : plan.dotBuffers)
    smemTypes.push_back(pb.type);
  if (plan.keyWords)
    smemTypes.push_back(workgroupBuffer(512, b_.getI32Type()));
  auto fn = gpu::GPUFuncOp::create(b_, k_.name, b_.getFunctionType(argTypes, {}), smemTypes);
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b_.getUnitAttr());
  fn.setKnownBlockSizeAttr(b_.getDenseI32ArrayAttr({threads_, 1, 1}));
  program_->annotate(fn, plan.keyTilesInFlight);
  return fn;
}

void Emitter::bindProgram(gpu::GPUFuncOp fn, const WorkgroupPlan &plan) {
  Block *entry = &fn.getBody().front();
  b_.setInsertionPointToStart(entry);
  size_t a = 0;
  for (size_t i = 0; i < k_.buffers.size(); ++i)
    buffers_.push_back(entry->getArgument(a++));
  for (size_t i = 0; i < k_.scalars.size(); ++i)
    scalars_.push_back(entry->getArgument(a++));
  size_t w = 0;
  for (auto [e, n] : plan.shuffleLanes)
    smem_[e] = fn.getWorkgroupAttributions()[w++];
  stageBufs_.resize(stageCount_);
  mlir::Value exchange;
  for (const WorkgroupPlan::Buffer &pb : plan.dotBuffers) {
    if (pb.align)
      fn.setWorkgroupAttributionAttr(static_cast<unsigned>(w), LLVM::LLVMDialect::getAlignAttrName(),
                                     b_.getI64IntegerAttr(pb.align));
    mlir::Value buf = fn.getWorkgroupAttributions()[w++];
    switch (pb.role) {
    case WorkgroupPlan::Role::StageB: stageBufs_[dotStageOf_[pb.key]] = buf; break;
    case WorkgroupPlan::Role::Result: dotResult_[pb.key] = buf; break;
    case WorkgroupPlan::Role::Exchange: exchange = buf; break;
    }
  }
  lane_ = gpu::ThreadIdOp::create(b_, gpu::Dimension::x);
  program_->bind(exchange, plan.keysAsF32,
                 plan.keyWords ? mlir::Value(fn.getWorkgroupAttributions()[w++]) : mlir::Value());
  programId_ = arith::IndexCastOp::create(b_, b_.getI64Type(), gpu::BlockIdOp::create(b_, gpu::Dimension::x));
}

// In steps: the layouts and the target's checks, the workgroup memory, the kernel function (with
// the target's attributes), its arguments and tables, then the body.
StatusOr<OwningOpRef<ModuleOp>> Emitter::runGpu() {
  OwningOpRef<ModuleOp> module = ModuleOp::create(b_.getLoc());
  (*module)->setAttr("gpu.container_module", b_.getUnitAttr());
  b_.setInsertionPointToEnd(module->getBody());
  auto gpuModule = gpu::GPUModuleOp::create(b_, "m3idx_kernels");
  b_.setInsertionPointToStart(gpuModule.getBody());
  M3IDX_RETURN_IF_ERROR(planProgram());
  StatusOr<WorkgroupPlan> plan = planWorkgroupMemory();
  if (!plan.ok())
    return plan.status();
  program_->declareGlobals(gpuModule.getBody(), plan->keysAsF32);
  bindProgram(declareKernel(*plan), *plan);
  emitRegion(k_.body);
  gpu::ReturnOp::create(b_);
  if (!error_.empty())
    return Status::error(fmt::format("kernel @{}: GPU lowering: {}", k_.name, error_));
  if (failed(verify(*module)))
    return Status::error(fmt::format("kernel @{}: emitted GPU MLIR does not verify", k_.name));
  return module;
}

} // namespace m3idx::lowering
