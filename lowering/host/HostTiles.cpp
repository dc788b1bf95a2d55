// Host lowering of tiles wider than HostTiles::kPiece lanes. Each such tile lives in a stack buffer of
// its own, and every op on it is a loop over kPiece-lane pieces emitted once, so code size
// and compile time do not grow with tile widths. (LLVM's X86 back end spends time superlinear in
// the size of one basic block: a straight-line 8192-lane tile, or a 2048-byte masked load that a
// machine without AVX-512 scalarizes into 2048 branches, took seconds to minutes to compile.)
//
// Invariants: a wide value is written once, where it is defined, into the buffer that stands for it
// in the host form; a loop-carried or branch-yielded wide value has a buffer of its own that the
// region's yield copies into;
// small floats and i1 are stored as bytes (no memref of f8 or i1 reaches LLVM, and i1 vectors
// would be bit-packed in memory while scalar i1 accesses are byte-sized).
#include "lowering/host/HostTiles.h"

#include <functional>
#include <limits>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "tile/TileDialect.h"

namespace m3idx::lowering {

using namespace mlir;

bool HostTiles::wide(mlir::Type t) {
  auto tile = dyn_cast<RankedTensorType>(t);
  return tile && tile.getDimSize(0) > kPiece;
}

int64_t HostTiles::lanes(mlir::Value tile) { return cast<ShapedType>(tile.getType()).getNumElements(); }

mlir::Type HostTiles::storage(mlir::Type elem) {
  if (elem.isInteger(1) || isa<Float8E4M3FNType, Float4E2M1FNType>(elem))
    return IntegerType::get(elem.getContext(), 8);
  return elem;
}

mlir::Value HostTiles::entryAlloca(ImplicitLocOpBuilder &b, int64_t n, mlir::Type elem) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry_);
  return memref::AllocaOp::create(b, MemRefType::get({n}, elem), b.getI64IntegerAttr(64));
}

// Loops over pieces stay rolled whatever LLVM's unroller would judge of their constant trip
// counts: code size must not grow with the tile.
scf::ForOp HostTiles::rolledLoop(ImplicitLocOpBuilder &b, int64_t lo, int64_t hi, ValueRange inits) {
  auto loop = scf::ForOp::create(b, arith::ConstantIndexOp::create(b, lo), arith::ConstantIndexOp::create(b, hi),
                                 arith::ConstantIndexOp::create(b, 1), inits);
  auto unroll = LLVM::LoopUnrollAttr::get(b.getContext(), /*disable=*/b.getBoolAttr(true), {}, {}, {}, {}, {}, {});
  // scf-to-cf carries this attribute to the loop's latch branch, where LLVM reads it.
  loop->setAttr("llvm.loop_annotation", LLVM::LoopAnnotationAttr::get(b.getContext(), {}, {}, {}, unroll, {}, {}, {},
                                                                       {}, {}, {}, {}, {}, {}, {}, {}));
  return loop;
}

mlir::Value HostTiles::newBuffer(ImplicitLocOpBuilder &b, mlir::Value tile) {
  auto t = cast<ShapedType>(tile.getType());
  return entryAlloca(b, t.getNumElements(), storage(t.getElementType()));
}

mlir::Value HostTiles::buffer(ImplicitLocOpBuilder &b, mlir::Value converted) {
  if (isa<MemRefType>(converted.getType()))
    return converted;
  auto vt = cast<VectorType>(converted.getType());
  mlir::Value buf = entryAlloca(b, vt.getNumElements(), storage(vt.getElementType()));
  storePiece(b, buf, vt.getElementType(), arith::ConstantIndexOp::create(b, 0), converted);
  return buf;
}

mlir::Value HostTiles::loadPiece(ImplicitLocOpBuilder &b, mlir::Value buf, mlir::Type elem, mlir::Value at,
                                 int64_t lanes) {
  mlir::Value v = vector::LoadOp::create(b, VectorType::get({lanes}, storage(elem)), buf, ValueRange{at});
  if (elem.isInteger(1))
    return arith::TruncIOp::create(b, VectorType::get({lanes}, elem), v);
  if (storage(elem) != elem) // f8E4M3FN (the host converter refuses wide f4E2M1FN tiles)
    return arith::BitcastOp::create(b, VectorType::get({lanes}, elem), v);
  return v;
}

void HostTiles::storePiece(ImplicitLocOpBuilder &b, mlir::Value buf, mlir::Type elem, mlir::Value at,
                           mlir::Value piece) {
  auto vt = cast<VectorType>(piece.getType());
  mlir::Type bytes = vt.clone(b.getI8Type());
  if (elem.isInteger(1))
    piece = arith::ExtUIOp::create(b, bytes, piece);
  else if (storage(elem) != elem)
    piece = arith::BitcastOp::create(b, bytes, piece);
  vector::StoreOp::create(b, piece, buf, ValueRange{at});
}

// A wide splat's scalar is read from the tile form: the conversion runs with rollback, under
// which a replaced value's later uses (these) are replaced too.
mlir::Value HostTiles::pieceOf(ImplicitLocOpBuilder &b, mlir::Value tile, mlir::Value converted, mlir::Value at,
                               int64_t n) {
  mlir::Type elem = cast<ShapedType>(tile.getType()).getElementType();
  mlir::Operation *def = wide(tile) ? tile.getDefiningOp() : nullptr;
  auto vt = VectorType::get({n}, elem);
  if (auto splat = dyn_cast_or_null<tensor::SplatOp>(def))
    return vector::BroadcastOp::create(b, vt, splat.getInput());
  if (isa_and_nonnull<tile::IotaOp>(def)) { // lanes [at, at + n)
    SmallVector<int64_t> lanes;
    for (int64_t i = 0; i < n; ++i)
      lanes.push_back(i);
    mlir::Value base = arith::ConstantOp::create(b, DenseElementsAttr::get(vt, ArrayRef<int64_t>(lanes)));
    return arith::AddIOp::create(b, base,
                                 vector::BroadcastOp::create(b, vt, arith::IndexCastOp::create(b, elem, at)));
  }
  return loadPiece(b, buffer(b, converted), elem, at, n);
}

mlir::Value HostTiles::result(ImplicitLocOpBuilder &b, mlir::Value tile, mlir::Value buf) {
  if (wide(tile))
    return buf;
  auto t = cast<ShapedType>(tile.getType());
  return loadPiece(b, buf, t.getElementType(), arith::ConstantIndexOp::create(b, 0), t.getNumElements());
}

void HostTiles::forPieces(ImplicitLocOpBuilder &b, int64_t lanes, int64_t piece,
                          const std::function<void(mlir::Value, int64_t)> &body) {
  if (const int64_t full = lanes / piece; full > 0) {
    auto loop = rolledLoop(b, 0, full);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    body(arith::MulIOp::create(b, loop.getInductionVar(), arith::ConstantIndexOp::create(b, piece)), piece);
  }
  if (const int64_t tail = lanes % piece; tail > 0)
    body(arith::ConstantIndexOp::create(b, lanes - tail), tail);
}

void HostTiles::copy(ImplicitLocOpBuilder &b, mlir::Value dst, mlir::Value src, int64_t lanes) {
  mlir::Type e = cast<MemRefType>(src.getType()).getElementType();
  forPieces(b, lanes, kPiece, [&](mlir::Value at, int64_t n) {
    vector::StoreOp::create(b, vector::LoadOp::create(b, VectorType::get({n}, e), src, ValueRange{at}), dst,
                            ValueRange{at});
  });
}

} // namespace m3idx::lowering
