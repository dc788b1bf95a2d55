// Host lowering of tiles wider than HostTiles::kPiece lanes. Each such tile lives in a stack buffer of
// its own, and every op on it is a loop over kPiece-lane pieces emitted once, so code size
// and compile time do not grow with tile widths. (LLVM's X86 back end spends time superlinear in
// the size of one basic block: a straight-line 8192-lane tile, or a 2048-byte masked load that a
// machine without AVX-512 scalarizes into 2048 branches, took seconds to minutes to compile.)
//
// Invariants: a wide value is written once, where it is defined, into HostTiles::wideBuf_[id]; a loop-
// carried or branch-yielded wide value has a buffer of its own that the region's yield copies into;
// small floats and i1 are stored as bytes (no memref of f8 or i1 reaches LLVM, and i1 vectors
// would be bit-packed in memory while scalar i1 accesses are byte-sized).
#include "lowering/host/HostTiles.h"

#include <functional>
#include <limits>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace m3idx::lowering {

using namespace mlir;

mlir::Value HostTiles::entryAlloca(int64_t n, mlir::Type elem) {
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(entry_);
  return memref::AllocaOp::create(b_, MemRefType::get({n}, elem), b_.getI64IntegerAttr(64));
}


bool HostTiles::wide(dsl::ValueId v) const {
  const dsl::Type t = k_.typeOf(v);
  return t.isTile() && t.lanes > kPiece;
}

// Loops over pieces stay rolled whatever LLVM's unroller would judge of their constant trip
// counts: code size must not grow with the tile.
scf::ForOp HostTiles::rolledLoop(int64_t lo, int64_t hi, ValueRange inits) {
  auto loop = scf::ForOp::create(b_, arith::ConstantIndexOp::create(b_, lo), arith::ConstantIndexOp::create(b_, hi),
                                 arith::ConstantIndexOp::create(b_, 1), inits);
  auto unroll = LLVM::LoopUnrollAttr::get(b_.getContext(), /*disable=*/b_.getBoolAttr(true), {}, {}, {}, {}, {}, {});
  // scf-to-cf carries this attribute to the loop's latch branch, where LLVM reads it.
  loop->setAttr("llvm.loop_annotation", LLVM::LoopAnnotationAttr::get(b_.getContext(), {}, {}, {}, unroll, {}, {}, {},
                                                                       {}, {}, {}, {}, {}, {}, {}, {}));
  return loop;
}

mlir::Type HostTiles::storage(Elem e) {
  switch (e) {
  case Elem::I1: case Elem::F8E4M3FN: case Elem::F4E2M1FN: return b_.getI8Type();
  default: return elemType(b_, e);
  }
}

mlir::Value HostTiles::newBuffer(dsl::ValueId v) {
  const dsl::Type t = k_.typeOf(v);
  mlir::Value buf = entryAlloca(t.lanes, storage(t.elem));
  wideBuf_[v.id] = buf;
  return buf;
}

mlir::Value HostTiles::buffer(dsl::ValueId v) {
  if (wide(v)) {
    auto it = wideBuf_.find(v.id);
    if (it != wideBuf_.end())
      return it->second;
    e_.fail(fmt::format("host: wide tile %{} used before it is defined", v.id));
    return entryAlloca(k_.typeOf(v).lanes, storage(k_.typeOf(v).elem));
  }
  const dsl::Type t = k_.typeOf(v);
  mlir::Value buf = entryAlloca(t.lanes, storage(t.elem));
  storePiece(buf, t.elem, arith::ConstantIndexOp::create(b_, 0), e_.get(v));
  return buf;
}

mlir::Value HostTiles::loadPiece(mlir::Value buf, Elem e, mlir::Value at, int64_t lanes) {
  mlir::Value v = vector::LoadOp::create(b_, VectorType::get({lanes}, storage(e)), buf, ValueRange{at});
  switch (e) {
  case Elem::I1: return arith::TruncIOp::create(b_, VectorType::get({lanes}, b_.getI1Type()), v);
  case Elem::F8E4M3FN: case Elem::F4E2M1FN:
    if (e == Elem::F4E2M1FN)
      e_.fail("host: wide f4E2M1FN tiles are not stored");
    return arith::BitcastOp::create(b_, VectorType::get({lanes}, elemType(b_, Elem::F8E4M3FN)), v);
  default: return v;
  }
}

void HostTiles::storePiece(mlir::Value buf, Elem e, mlir::Value at, mlir::Value piece) {
  auto vt = cast<VectorType>(piece.getType());
  mlir::Type bytes = vt.clone(b_.getI8Type());
  if (e == Elem::I1)
    piece = arith::ExtUIOp::create(b_, bytes, piece);
  else if (e == Elem::F8E4M3FN || e == Elem::F4E2M1FN)
    piece = arith::BitcastOp::create(b_, bytes, piece);
  vector::StoreOp::create(b_, piece, buf, ValueRange{at});
}

mlir::Value HostTiles::loadWhole(mlir::Value buf, dsl::ValueId v) {
  const dsl::Type t = k_.typeOf(v);
  return loadPiece(buf, t.elem, arith::ConstantIndexOp::create(b_, 0), t.lanes);
}

mlir::Value HostTiles::pieceOf(dsl::ValueId v, mlir::Value at, int64_t n) {
  const dsl::Type t = k_.typeOf(v);
  auto it = splats_.find(v.id);
  if (it == splats_.end())
    return loadPiece(buffer(v), t.elem, at, n);
  auto vt = VectorType::get({n}, elemType(b_, t.elem));
  const dsl::Op &def = k_.ops[it->second];
  switch (def.kind) {
  case OpKind::Splat: return vector::BroadcastOp::create(b_, vt, e_.get(def.operands[0]));
  case OpKind::ConstInt: return constant(b_, vt, static_cast<double>(def.intAttr));
  case OpKind::ConstFloat: return constant(b_, vt, def.floatAttr);
  default: { // iota: lanes [at, at + n)
    SmallVector<int64_t> lanes;
    for (int64_t i = 0; i < n; ++i)
      lanes.push_back(i);
    mlir::Value base = arith::ConstantOp::create(b_, DenseElementsAttr::get(vt, ArrayRef<int64_t>(lanes)));
    return arith::AddIOp::create(
        b_, base, vector::BroadcastOp::create(b_, vt, arith::IndexCastOp::create(b_, elemType(b_, t.elem), at)));
  }
  }
}

void HostTiles::setResult(dsl::ValueId v, mlir::Value buf) {
  if (wide(v))
    wideBuf_[v.id] = buf;
  else
    values_[v.id] = loadWhole(buf, v);
}

void HostTiles::forPieces(int64_t lanes, int64_t piece,
                            const std::function<void(mlir::Value, int64_t)> &body) {
  if (const int64_t full = lanes / piece; full > 0) {
    auto loop = rolledLoop(0, full);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    body(arith::MulIOp::create(b_, loop.getInductionVar(), arith::ConstantIndexOp::create(b_, piece)), piece);
  }
  if (const int64_t tail = lanes % piece; tail > 0)
    body(arith::ConstantIndexOp::create(b_, lanes - tail), tail);
}

void HostTiles::copy(mlir::Value dst, mlir::Value src, int64_t lanes) {
  mlir::Type e = cast<MemRefType>(src.getType()).getElementType();
  forPieces(lanes, kPiece, [&](mlir::Value at, int64_t n) {
    vector::StoreOp::create(b_, vector::LoadOp::create(b_, VectorType::get({n}, e), src, ValueRange{at}), dst,
                            ValueRange{at});
  });
}

// ids[i] names buffers[i] where there is one (a wide value), else the next of `narrow`.
void HostTiles::bind(ArrayRef<dsl::ValueId> ids, const std::vector<mlir::Value> &buffers, ValueRange narrow) {
  for (size_t i = 0, j = 0; i < ids.size(); ++i) {
    if (buffers[i])
      wideBuf_[ids[i].id] = buffers[i];
    else
      values_[ids[i].id] = narrow[j++];
  }
}

} // namespace m3idx::lowering
