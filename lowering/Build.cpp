#include "lowering/Build.h"

#include <optional>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"

namespace m3idx::lowering {

using namespace mlir;

mlir::Value constant(ImplicitLocOpBuilder &b, mlir::Type t, double v) {
  mlir::Type e = getElementTypeOrSelf(t);
  TypedAttr scalarAttr = isa<FloatType>(e) ? TypedAttr(b.getFloatAttr(e, v))
                                           : TypedAttr(b.getIntegerAttr(e, static_cast<int64_t>(v)));
  if (auto vt = dyn_cast<VectorType>(t))
    return arith::ConstantOp::create(b, DenseElementsAttr::get(vt, scalarAttr));
  return arith::ConstantOp::create(b, scalarAttr);
}

mlir::Value toIndex(ImplicitLocOpBuilder &b, mlir::Value v) {
  if (std::optional<int64_t> c = mlir::getConstantIntValue(v))
    return arith::ConstantIndexOp::create(b, *c);
  return arith::IndexCastOp::create(b, b.getIndexType(), v);
}

mlir::Value toF32(ImplicitLocOpBuilder &b, mlir::Value v) {
  mlir::Type t = v.getType();
  if (getElementTypeOrSelf(t).isF32())
    return v;
  auto vt = dyn_cast<VectorType>(t);
  return arith::ExtFOp::create(b, vt ? mlir::Type(vt.clone(b.getF32Type())) : b.getF32Type(), v);
}

} // namespace m3idx::lowering
