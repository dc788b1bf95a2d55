#include "lowering/TileConversion.h"

#include "lowering/Build.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "tile/TileDialect.h"

namespace m3idx::lowering {

using namespace mlir;

bool holdsNoTiles(Operation *op) {
  return llvm::none_of(op->getOperandTypes(), llvm::IsaPred<RankedTensorType>) &&
         llvm::none_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>);
}

bool isElementwiseOnTiles(Operation *op) {
  if (isa<tensor::SplatOp, tile::IotaOp, tile::ClampFOp, tile::PackScoreKeyOp>(op))
    return true;
  // A tile constant (which FromDsl never makes: its constants are scalars, splat where tiled) has
  // no form on any target: a named error, not a vector op with a tensor attribute.
  return isa<arith::ArithDialect>(op->getDialect()) && !isa<arith::ConstantOp>(op) && !holdsNoTiles(op);
}

scf::ForOp createIndexLoop(ImplicitLocOpBuilder &b, ConversionPatternRewriter &rewriter, mlir::Value lb,
                           mlir::Value ub, mlir::Value step, ValueRange inits, mlir::Value &inductionI64) {
  auto forOp = scf::ForOp::create(b, toIndex(b, lb), toIndex(b, ub), toIndex(b, step), inits);
  Block *body = forOp.getBody();
  if (!body->empty()) // the builder's implicit yield (no iter args)
    rewriter.eraseOp(&body->back());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(body);
  inductionI64 = arith::IndexCastOp::create(b, b.getI64Type(), forOp.getInductionVar());
  return forOp;
}

} // namespace m3idx::lowering
