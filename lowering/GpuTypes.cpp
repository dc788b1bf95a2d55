#include "lowering/GpuTypes.h"

#include "lowering/GpuThreads.h"
#include "mlir/IR/BuiltinTypes.h"
#include "tile/TileDialect.h"

namespace m3idx::lowering {

using namespace mlir;

// Conversions are tried last added first: a target's own layouts (added after this) come before
// blocked, which takes every tile they leave.
GpuTypeConverter::GpuTypeConverter(int threads) {
  addConversion([](mlir::Type t) { return t; });
  addConversion([threads](RankedTensorType t) -> std::optional<mlir::Type> {
    if (tile::layoutOf(t) != tile::Layout::Blocked)
      return mlir::Type(); // a failure (not "try the next"): a layout no target conversion took
    return VectorType::get({GpuThreads::chunk(t.getDimSize(0), threads)}, t.getElementType());
  });
}

} // namespace m3idx::lowering
