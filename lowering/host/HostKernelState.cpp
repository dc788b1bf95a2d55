#include "lowering/host/HostKernelState.h"

#include <fmt/format.h>

#include "lowering/Build.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "tile/TileDialect.h"

namespace m3idx::lowering {

using namespace mlir;

HostTypeConverter::HostTypeConverter() {
  addConversion([](mlir::Type t) { return t; });
  addConversion([](RankedTensorType t) -> mlir::Type {
    if (HostTiles::wide(t))
      return MemRefType::get({t.getDimSize(0)}, HostTiles::storage(t.getElementType()));
    return VectorType::get({t.getDimSize(0)}, t.getElementType());
  });
}

LogicalResult HostKernelState::fail(Operation *op, const std::string &what) {
  if (error.empty()) {
    error = what + sourceOf(op->getLoc());
    failedOp = op;
  }
  return failure();
}

void HostKernelState::defined(ImplicitLocOpBuilder &b, Operation *op, ValueRange converted) {
  for (auto [tile, value] : llvm::zip(op->getResults(), converted))
    for (OpOperand &use : tile.getUses())
      if (auto dot = dyn_cast<tile::DotTilesOp>(use.getOwner());
          dot && use.getOperandNumber() == 1 && !widenedRows.count(tile)) {
        widenedRows[tile] = widenRows(b, tile, value, static_cast<int64_t>(dot.getK()));
        break;
      }
}

// Done once where b is defined when b is a result of an op (the query tile, loop-invariant in the
// score kernels), else at the dot.
mlir::Value HostKernelState::widenRows(ImplicitLocOpBuilder &b, mlir::Value tile, mlir::Value converted, int64_t k) {
  auto t = cast<ShapedType>(tile.getType());
  const int64_t N = t.getNumElements() / k;
  mlir::Type f32 = b.getF32Type();
  mlir::Value raw = tiles.buffer(b, converted), wide = tiles.entryAlloca(b, N * k, f32);
  auto loop = tiles.rolledLoop(b, 0, N);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  mlir::Value at = arith::MulIOp::create(b, loop.getInductionVar(), arith::ConstantIndexOp::create(b, k));
  vector::StoreOp::create(b, toF32(b, tiles.loadPiece(b, raw, t.getElementType(), at, k)), wide, ValueRange{at});
  return wide;
}

} // namespace m3idx::lowering
