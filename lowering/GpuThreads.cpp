// GpuThreads.h: a GPU program's lane-level building blocks. A tile is spread blocked over the
// program's threads; cross-lane ops become warp shuffles or go through a workgroup buffer between
// barriers; scalars are uniform.
#include "lowering/GpuThreads.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "lowering/Build.h"
#include "lowering/TargetLowering.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "tile/FromDsl.h"

namespace m3idx::lowering {

using namespace mlir;

mlir::Value GpuThreads::maxNum(mlir::Value a, mlir::Value b) { return LLVM::MaxNumOp::create(b_, a, b); }

mlir::Value GpuThreads::laneI64() { return arith::IndexCastOp::create(b_, b_.getI64Type(), lane_); }

mlir::Value GpuThreads::warpLaneI64() {
  const int width = target_.shuffleWidth(threads_);
  return width == threads_ ? laneI64() : arith::RemUIOp::create(b_, laneI64(), constant(b_, b_.getI64Type(), width));
}

mlir::Value GpuThreads::laneBelow(int64_t n) {
  return arith::CmpIOp::create(b_, arith::CmpIPredicate::ult, laneI64(),
                               constant(b_, b_.getI64Type(), static_cast<double>(n)));
}

// gpu.shuffle moves 32-bit values: narrower values are widened, i64 goes as two halves. Shuffles
// stay inside a warp: in programs of several warps an indexed one (whose source may be in another
// warp) is refused.
mlir::Value GpuThreads::shuffleIdx(mlir::Value v, mlir::Value srcLane) {
  if (threads_ > target_.shuffleWidth(threads_))
    fail_(fmt::format("a lane shuffle across the warps of a {}-thread program", threads_));
  mlir::Value width = constant(b_, b_.getI32Type(), target_.shuffleWidth(threads_));
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
        b_, b_.getI32Type(), arith::ShRUIOp::create(b_, v, constant(b_, t, 32))));
    return arith::OrIOp::create(
        b_, arith::ShLIOp::create(b_, arith::ExtUIOp::create(b_, t, hi), constant(b_, t, 32)),
        arith::ExtUIOp::create(b_, t, lo));
  }
  return arith::TruncIOp::create(b_, t, move32(arith::ExtUIOp::create(b_, b_.getI32Type(), v)));
}

void GpuThreads::barrier() { target_.barrier(b_, threads_); }

mlir::Value GpuThreads::shuffleXor(mlir::Value v, int32_t mask) {
  const int width = target_.shuffleWidth(threads_);
  if (mask >= width)
    fail_(fmt::format("a lane shuffle across the warps of a {}-thread program", threads_));
  auto op = gpu::ShuffleOp::create(b_, v, mask, width, gpu::ShuffleMode::XOR);
  return op.getShuffleResult();
}

// Reduces a distributed tile to a uniform scalar: within the thread, then a butterfly over the
// warp. Lanes a partial tile does not have contribute the identity.
mlir::Value GpuThreads::warpReduce(mlir::Value perThread, int64_t lanes, bool add, bool isFloat) {
  mlir::Type e = getElementTypeOrSelf(perThread.getType());
  vector::CombiningKind kind = add ? vector::CombiningKind::ADD
                               : isFloat ? vector::CombiningKind::MAXNUMF
                                         : vector::CombiningKind::MAXSI;
  mlir::Value s = vector::ReductionOp::create(b_, kind, perThread, mlir::Value(),
                                              isFloat ? arith::FastMathFlags::reassoc
                                                      : arith::FastMathFlags::none);
  if (!e.isF32() && !e.isInteger(32)) {
    fail_("a GPU reduction over a tile of a type other than i32 or f32");
    return s;
  }
  mlir::Value identity =
      add ? constant(b_, e, 0.0)
          : isFloat ? constant(b_, e, -std::numeric_limits<double>::infinity())
                    : constant(b_, e, static_cast<double>(INT32_MIN));
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

mlir::Value GpuThreads::extract(mlir::Value t, int64_t tileLanes, int64_t lane) {
  const int64_t k = chunk(tileLanes);
  mlir::Value mine = vector::ExtractOp::create(b_, t, ArrayRef<int64_t>{partial(tileLanes) ? 0 : lane % k});
  return shuffleIdx(mine, constant(b_, b_.getI64Type(), static_cast<double>(partial(tileLanes) ? lane : lane / k)));
}

// Lane `lane` (a per-thread value) of a distributed tile: every register a holder may keep it in is
// shuffled from its holder, then the right one selected (shuffles need one register index for all
// threads).
mlir::Value GpuThreads::extractDynamic(mlir::Value t, int64_t tileLanes, mlir::Value lane) {
  const int64_t k = chunk(tileLanes);
  mlir::Type i64 = b_.getI64Type();
  mlir::Value holder = partial(tileLanes) ? lane : arith::DivSIOp::create(b_, lane, constant(b_, i64, k));
  mlir::Value reg = partial(tileLanes) ? constant(b_, i64, 0) : arith::RemSIOp::create(b_, lane, constant(b_, i64, k));
  mlir::Value result;
  for (int64_t j = 0; j < k; ++j) {
    mlir::Value v = shuffleIdx(vector::ExtractOp::create(b_, t, ArrayRef<int64_t>{j}), holder);
    result = j == 0 ? v
                    : mlir::Value(arith::SelectOp::create(
                          b_, arith::CmpIOp::create(b_, arith::CmpIPredicate::eq, reg, constant(b_, i64, j)),
                          v, result));
  }
  return result;
}

// A shuffle of one-lane-per-thread tiles in which every lane taken from an operand comes from the
// same distance (a shift, as in the top-k's insertion network) or from the lane xor one constant
// (a bitonic network's compare-exchange partner): one warp shuffle per operand (none for a splat,
// whose lanes are all equal, or a lane that stays in its thread) and a select, instead of a round
// trip through shared memory between two barriers. Null when the mask is of neither form.
mlir::Value GpuThreads::lanePermutation(mlir::Value a, mlir::Value b, int64_t lanes,
                                     ArrayRef<int32_t> mask, std::array<bool, 2> splat) {
  const int64_t outLanes = static_cast<int64_t>(mask.size());
  if (lanes > threads_ || outLanes > threads_ || threads_ > target_.shuffleWidth(threads_))
    return {};
  // Per operand: the lanes it feeds, and whether they all come from i + shift / from i ^ flip.
  struct Source {
    bool used = false, byShift = true, byXor = true;
    int64_t shift = 0, flip = 0;
  } src[2];
  uint64_t fromB = 0; // bit i: output lane i comes from b (outLanes <= threads <= 64)
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
    fromB |= static_cast<uint64_t>(op) << i;
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
      return shuffleIdx(v, arith::AddIOp::create(b_, laneI64(), constant(b_, i64, static_cast<double>(s.shift))));
    return shuffleIdx(v, arith::XOrIOp::create(b_, laneI64(), constant(b_, i64, static_cast<double>(s.flip))));
  };
  mlir::Value va = take(a, 0), vb = take(b, 1), v;
  if (!src[1].used)
    v = va;
  else if (!src[0].used)
    v = vb;
  else {
    // (an exact i64: a wave64's mask has bits a double cannot hold)
    mlir::Value mask64 = arith::ConstantOp::create(b_, b_.getI64IntegerAttr(static_cast<int64_t>(fromB)));
    mlir::Value bit = arith::AndIOp::create(b_, arith::ShRUIOp::create(b_, mask64, laneI64()), constant(b_, i64, 1));
    v = arith::SelectOp::create(b_, arith::CmpIOp::create(b_, arith::CmpIPredicate::ne, bit, constant(b_, i64, 0)),
                                vb, va);
  }
  return vector::BroadcastOp::create(b_, VectorType::get({1}, v.getType()), v);
}

mlir::Value GpuThreads::inThreadPermutation(mlir::Value a, mlir::Value b, int64_t lanes, ArrayRef<int32_t> mask) {
  const int64_t outLanes = static_cast<int64_t>(mask.size()), k = chunk(lanes), kOut = chunk(outLanes);
  if (partial(lanes) || partial(outLanes) || k * kOut < 2) // one lane a thread each: lanePermutation
    return {};
  SmallVector<int64_t> picks(kOut, -1); // output j of each thread: element picks[j] of a ++ b
  for (int64_t i = 0; i < outLanes; ++i) {
    const int64_t from = mask[i] % lanes, pick = (mask[i] >= lanes ? k : 0) + from % k;
    if (from / k != i / kOut || (picks[i % kOut] >= 0 && picks[i % kOut] != pick))
      return {};
    picks[i % kOut] = pick;
  }
  return vector::ShuffleOp::create(b_, a, b, picks);
}

// A general lane permutation through the workgroup buffer: all threads write their lanes of a and
// b, wait, read the lanes the mask names, wait (so the buffer can be reused).
mlir::Value GpuThreads::shuffle(mlir::Value a, mlir::Value b, int64_t lanes, ArrayRef<int32_t> mask,
                                dsl::Elem elem, std::array<bool, 2> splat) {
  if (mlir::Value v = inThreadPermutation(a, b, lanes, mask))
    return v;
  if (mlir::Value v = lanePermutation(a, b, lanes, mask, splat))
    return v;
  const bool isBool = elem == dsl::Elem::I1;
  mlir::Value buf = scratch_.at(static_cast<int>(elem == dsl::Elem::I1 ? dsl::Elem::I8 : elem));
  mlir::Type i64 = b_.getI64Type(), e = tile::elemType(b_.getContext(), elem);
  mlir::Type stored = isBool ? b_.getI8Type() : e;
  const int64_t k = chunk(lanes);
  auto writeTile = [&](mlir::Value tile, int64_t base) {
    auto body = [&] {
      for (int64_t j = 0; j < k; ++j) {
        mlir::Value v = vector::ExtractOp::create(b_, tile, ArrayRef<int64_t>{j});
        if (isBool)
          v = arith::ExtUIOp::create(b_, stored, v);
        mlir::Value at = arith::AddIOp::create(
            b_, arith::MulIOp::create(b_, laneI64(), constant(b_, i64, k)), constant(b_, i64, base + j));
        memref::StoreOp::create(b_, v, buf, ValueRange{toIndex(b_, at)});
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
  mlir::Value out = constant(b_, VectorType::get({kOut}, e), 0);
  for (int64_t j = 0; j < kOut; ++j) {
    mlir::Value outLane = arith::AddIOp::create(
        b_, arith::MulIOp::create(b_, laneI64(), constant(b_, i64, kOut)), constant(b_, i64, j));
    if (partial(outLanes)) // threads past the tile read lane 0's source: in range, unused
      outLane = arith::SelectOp::create(b_, laneBelow(outLanes), outLane, constant(b_, i64, 0));
    // Which source lane: a select chain for short masks (a dynamic index into a constant vector
    // would go through local memory), an indexed read of the table otherwise.
    mlir::Value src;
    if (outLanes <= threads_) {
      src = constant(b_, i64, static_cast<double>(table[0]));
      for (int64_t m = 1; m < outLanes; ++m)
        src = arith::SelectOp::create(
            b_, arith::CmpIOp::create(b_, arith::CmpIPredicate::eq, outLane, constant(b_, i64, m)),
            constant(b_, i64, static_cast<double>(table[m])), src);
    } else {
      src = vector::ExtractOp::create(b_, maskTable, ArrayRef<OpFoldResult>{toIndex(b_, outLane)});
    }
    mlir::Value v = memref::LoadOp::create(b_, buf, ValueRange{toIndex(b_, src)});
    if (isBool)
      v = arith::TruncIOp::create(b_, e, v);
    out = vector::InsertOp::create(b_, v, out, ArrayRef<int64_t>{j});
  }
  barrier();
  return out;
}

mlir::Value GpuThreads::loadTile(mlir::Value buf, mlir::Value off, int64_t lanes, mlir::Type elem,
                                 int64_t alignBytes) {
  const int64_t k = chunk(lanes);
  auto vt = VectorType::get({k}, elem);
  mlir::Value at = arith::AddIOp::create(
      b_, off, arith::MulIOp::create(b_, laneI64(), constant(b_, b_.getI64Type(), k)));
  // A thread's part starts k elements after its neighbour's: aligned to the smaller of the two.
  const int64_t partBytes = k * elem.getIntOrFloatBitWidth() / 8;
  const int64_t align = alignBytes ? std::min(alignBytes, partBytes & -partBytes) : 0;
  if (!partial(lanes))
    return vector::LoadOp::create(b_, vt, buf, ValueRange{toIndex(b_, at)}, /*nontemporal=*/false,
                                  align ? llvm::MaybeAlign(align) : llvm::MaybeAlign());
  // An scf.if with results is built without terminators: each branch yields its value.
  auto guard = scf::IfOp::create(b_, TypeRange{vt}, laneBelow(lanes), true);
  {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToEnd(guard.thenBlock());
    scf::YieldOp::create(b_, ValueRange{vector::LoadOp::create(b_, vt, buf, ValueRange{toIndex(b_, at)})});
    b_.setInsertionPointToEnd(guard.elseBlock());
    scf::YieldOp::create(b_, ValueRange{constant(b_, vt, 0)});
  }
  return guard.getResult(0);
}

void GpuThreads::storeTile(mlir::Value buf, mlir::Value off, mlir::Value v, int64_t lanes, int64_t alignBytes) {
  const int64_t k = chunk(lanes);
  mlir::Value at = arith::AddIOp::create(
      b_, off, arith::MulIOp::create(b_, laneI64(), constant(b_, b_.getI64Type(), k)));
  // As loadTile: a thread's part is aligned to the smaller of the promise and its own size.
  const int64_t partBytes = k * getElementTypeOrSelf(v.getType()).getIntOrFloatBitWidth() / 8;
  const int64_t align = alignBytes ? std::min(alignBytes, partBytes & -partBytes) : 0;
  auto store = [&] {
    vector::StoreOp::create(b_, v, buf, ValueRange{toIndex(b_, at)}, /*nontemporal=*/false,
                            align ? llvm::MaybeAlign(align) : llvm::MaybeAlign());
  };
  if (!partial(lanes))
    return store();
  auto guard = scf::IfOp::create(b_, TypeRange{}, laneBelow(lanes), false);
  OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPoint(guard.thenBlock()->getTerminator());
  store();
}

// Each lane loads where its mask is set (and, in a tile narrower than the program, where its
// thread holds a lane at all: the others' offsets may be anything), else keeps 0.
mlir::Value GpuThreads::loadGather(mlir::Value buf, mlir::Value offsets, mlir::Value mask, int64_t lanes,
                                   mlir::Type elem) {
  const int64_t k = cast<VectorType>(offsets.getType()).getNumElements();
  SmallVector<mlir::Value> loaded;
  for (int64_t j = 0; j < k; ++j) {
    mlir::Value on = vector::ExtractOp::create(b_, mask, ArrayRef<int64_t>{j});
    if (partial(lanes))
      on = arith::AndIOp::create(b_, on, laneBelow(lanes));
    // An scf.if with results is built without terminators: each branch yields its value.
    auto guard = scf::IfOp::create(b_, TypeRange{elem}, on, true);
    {
      OpBuilder::InsertionGuard g(b_);
      b_.setInsertionPointToEnd(guard.thenBlock());
      scf::YieldOp::create(
          b_, ValueRange{memref::LoadOp::create(
                  b_, buf, ValueRange{toIndex(b_, vector::ExtractOp::create(b_, offsets, ArrayRef<int64_t>{j}))})});
      b_.setInsertionPointToEnd(guard.elseBlock());
      scf::YieldOp::create(b_, ValueRange{constant(b_, elem, 0)});
    }
    loaded.push_back(guard.getResult(0));
  }
  return vector::FromElementsOp::create(b_, VectorType::get({k}, elem), loaded);
}

// Each thread stores its own lanes where their mask is set (and, in a tile narrower than the
// program, where it holds a lane at all).
void GpuThreads::storeScatter(mlir::Value buf, mlir::Value offsets, mlir::Value v, mlir::Value mask,
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
                            ValueRange{toIndex(b_, vector::ExtractOp::create(b_, offsets, ArrayRef<int64_t>{j}))});
  }
}

// This thread's elements start at lane * perThread. Either they cover whole scale groups and the
// thread holds exactly their scales (checked when the decode was emitted), or perThread divides
// 16 and the one scale they share is held by another thread.
mlir::Value GpuThreads::threadScales(mlir::Value scales, int64_t scaleLanes, int64_t perThread) {
  if (perThread >= 16)
    return scales;
  mlir::Type i64 = b_.getI64Type();
  mlir::Value s = extractDynamic(
      scales, scaleLanes,
      arith::DivSIOp::create(b_, arith::MulIOp::create(b_, laneI64(), constant(b_, i64, perThread)),
                             constant(b_, i64, 16)));
  return vector::BroadcastOp::create(b_, VectorType::get({1}, b_.getI8Type()), s);
}

// Groups of S lanes: whole groups per thread reduce in registers; a group spread over several
// threads (consecutive ones, as tiles are blocked) reduces with xor shuffles, and output lane g
// comes from the group's first thread.
mlir::Value GpuThreads::reduceMaxGroups(mlir::Value t, int64_t lanes, int64_t groups) {
  mlir::Type f32 = b_.getF32Type(), i64 = b_.getI64Type();
  const int64_t S = lanes / groups, c = chunk(lanes);
  const double ninf = -std::numeric_limits<double>::infinity();
  auto slice = [&](int64_t from, int64_t n) -> mlir::Value {
    if (n == 1) // a one-lane vector.reduction folds to arith.maxnumf, a libdevice call on NVVM
      return maxNum(vector::ExtractOp::create(b_, t, ArrayRef<int64_t>{from}), constant(b_, f32, ninf));
    mlir::Value part = vector::ExtractStridedSliceOp::create(b_, t, ArrayRef<int64_t>{from},
                                                             ArrayRef<int64_t>{n}, ArrayRef<int64_t>{1});
    return vector::ReductionOp::create(b_, vector::CombiningKind::MAXNUMF, part,
                                       constant(b_, f32, ninf), arith::FastMathFlags::none)
        .getResult();
  };
  if (!partial(lanes) && c >= S) {
    mlir::Value out = constant(b_, VectorType::get({c / S}, f32), 0);
    for (int64_t g = 0; g < c / S; ++g)
      out = vector::InsertOp::create(b_, slice(g * S, S), out, ArrayRef<int64_t>{g});
    return out;
  }
  if (!partial(lanes) && S % c != 0) {
    fail_(fmt::format("reduce.max.groups: groups of {} lanes do not align with {} lanes per "
                           "thread",
                           S, c));
    return constant(b_, VectorType::get({chunk(groups)}, f32), 0);
  }
  const int64_t span = partial(lanes) ? S : S / c; // threads per group
  mlir::Value s = slice(0, c);
  if (partial(lanes))
    s = arith::SelectOp::create(b_, laneBelow(lanes), s, constant(b_, f32, ninf));
  for (int64_t off = span / 2; off >= 1; off /= 2)
    s = maxNum(s, shuffleXor(s, static_cast<int32_t>(off)));
  mlir::Value src = arith::SelectOp::create(b_, laneBelow(groups),
                                            arith::MulIOp::create(b_, laneI64(), constant(b_, i64, span)),
                                            constant(b_, i64, 0));
  return vector::BroadcastOp::create(b_, VectorType::get({1}, f32), shuffleIdx(s, src));
}

// Every thread's earlier stores reach the barrier before one thread's release fence (cumulative:
// it orders what that thread has observed) and its atomic; the old value goes to all lanes by a
// shuffle, and each lane's acquire fence orders its later loads after the atomic. A program of
// several warps passes it through its workgroup word instead (planned by GpuKernelState): thread 0
// acquires before it writes the word, and the barriers order the others' reads after that and
// every thread's read before the word is reused.
mlir::Value GpuThreads::atomicAdd(mlir::Value buf, mlir::Value at, mlir::Value v) {
  const char *scope = target_.deviceSyncScope();
  const bool acrossWarps = threads_ > target_.shuffleWidth(threads_);
  mlir::Value word = acrossWarps ? scratch_.at(static_cast<int>(v.getType().isInteger(32) ? dsl::Elem::I32
                                                                                          : dsl::Elem::I64))
                                 : mlir::Value();
  mlir::Value zero = constant(b_, b_.getIndexType(), 0);
  barrier();
  LLVM::FenceOp::create(b_, LLVM::AtomicOrdering::release, scope);
  auto first = scf::IfOp::create(b_, TypeRange{v.getType()}, laneBelow(1), /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(first.thenBlock());
    mlir::Value old =
        memref::AtomicRMWOp::create(b_, arith::AtomicRMWKind::addi, v, buf, ValueRange{toIndex(b_, at)}).getResult();
    if (acrossWarps) {
      LLVM::FenceOp::create(b_, LLVM::AtomicOrdering::acquire, scope);
      memref::StoreOp::create(b_, old, word, ValueRange{zero});
    }
    scf::YieldOp::create(b_, ValueRange{old});
    b_.setInsertionPointToStart(first.elseBlock());
    scf::YieldOp::create(b_, ValueRange{constant(b_, v.getType(), 0)});
  }
  mlir::Value old;
  if (acrossWarps) {
    barrier();
    old = memref::LoadOp::create(b_, word, ValueRange{zero});
    barrier();
  } else {
    old = shuffleIdx(first.getResult(0), constant(b_, b_.getI64Type(), 0));
  }
  LLVM::FenceOp::create(b_, LLVM::AtomicOrdering::acquire, scope);
  return old;
}

// This thread's lanes [first, first + c) of the tile, those below min(limit, lanes) read from
// memory, the rest 0 (a masked load touches no memory for them). alignBytes: as load_tile's.
mlir::Value GpuThreads::loadTileMasked(mlir::Value buf, mlir::Value off, mlir::Value limit, int64_t lanes,
                                       mlir::Type elem, int64_t alignBytes) {
  mlir::Type i64 = b_.getI64Type();
  const int64_t c = chunk(lanes);
  mlir::Value first = arith::MulIOp::create(b_, laneI64(), constant(b_, i64, c));
  mlir::Value lim = arith::MinSIOp::create(b_, limit, constant(b_, i64, lanes));
  mlir::Value count = arith::MaxSIOp::create(b_, arith::SubIOp::create(b_, lim, first), constant(b_, i64, 0));
  return loadPart(buf, arith::AddIOp::create(b_, off, first), count, c, elem, alignBytes);
}

mlir::Value GpuThreads::loadRows(mlir::Value buf, mlir::Value starts, mlir::Value counts, int64_t width,
                                 mlir::Type elem, int64_t alignBytes) {
  mlir::Value zero = constant(b_, b_.getI64Type(), 0);
  mlir::Value count = arith::MaxSIOp::create(
      b_, arith::MinSIOp::create(b_, vector::ExtractOp::create(b_, counts, ArrayRef<int64_t>{0}),
                                 constant(b_, b_.getI64Type(), width)),
      zero);
  return loadPart(buf, vector::ExtractOp::create(b_, starts, ArrayRef<int64_t>{0}), count, width, elem, alignBytes);
}

// The c elements from `at`, those at or past `count` 0. On GPUs a masked load becomes one guarded
// load per lane: take the plain vector load (wide where aligned) when all c are in, none when all
// are out (a padded tile's rows: a limit at a whole thread's part, as a row's 128 bytes are), the
// guarded loads between.
mlir::Value GpuThreads::loadPart(mlir::Value buf, mlir::Value at, mlir::Value count, int64_t c, mlir::Type elem,
                                 int64_t alignBytes) {
  mlir::Type i64 = b_.getI64Type();
  mlir::Value mask = vector::CreateMaskOp::create(b_, VectorType::get({c}, b_.getI1Type()),
                                                  ValueRange{toIndex(b_, count)});
  auto vt = VectorType::get({c}, elem);
  mlir::Value index = toIndex(b_, at);
  const int64_t partBytes = c * elem.getIntOrFloatBitWidth() / 8;
  const int64_t align = alignBytes ? std::min(alignBytes, partBytes & -partBytes) : 0;
  auto full = scf::IfOp::create(
      b_, TypeRange{vt}, arith::CmpIOp::create(b_, arith::CmpIPredicate::sge, count, constant(b_, i64, c)), true);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToEnd(full.thenBlock());
  scf::YieldOp::create(b_, ValueRange{vector::LoadOp::create(b_, vt, buf, ValueRange{index}, /*nontemporal=*/false,
                                                             align ? llvm::MaybeAlign(align) : llvm::MaybeAlign())});
  b_.setInsertionPointToEnd(full.elseBlock());
  auto none = scf::IfOp::create(
      b_, TypeRange{vt}, arith::CmpIOp::create(b_, arith::CmpIPredicate::sle, count, constant(b_, i64, 0)), true);
  scf::YieldOp::create(b_, ValueRange{none.getResult(0)});
  b_.setInsertionPointToEnd(none.thenBlock());
  scf::YieldOp::create(b_, ValueRange{constant(b_, vt, 0)});
  b_.setInsertionPointToEnd(none.elseBlock());
  scf::YieldOp::create(
      b_, ValueRange{vector::MaskedLoadOp::create(b_, vt, buf, ValueRange{index}, mask, constant(b_, vt, 0))});
  return full.getResult(0);
}

} // namespace m3idx::lowering
