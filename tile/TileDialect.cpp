#include "tile/TileDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"

#include "llvm/ADT/TypeSwitch.h"

#include "tile/TileDialect.cpp.inc"
#include "tile/TileEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "tile/TileAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "tile/TileOps.cpp.inc"

namespace m3idx::tile {

using mlir::failure;
using mlir::LogicalResult;
using mlir::success;

void TileDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tile/TileOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tile/TileAttrs.cpp.inc"
      >();
}

Layout layoutOf(mlir::Type tile) {
  auto t = mlir::dyn_cast<mlir::RankedTensorType>(tile);
  auto encoding = t ? mlir::dyn_cast_or_null<LayoutAttr>(t.getEncoding()) : LayoutAttr();
  return encoding ? encoding.getValue() : Layout::Blocked;
}

mlir::FailureOr<int64_t> warpsOf(mlir::func::FuncOp fn) {
  auto attr = fn->getAttrOfType<mlir::IntegerAttr>("m3idx.warps");
  const int64_t warps = attr ? attr.getInt() : 1;
  if (warps < 1 || warps > 32)
    return fn.emitError("@") << fn.getName() << " has m3idx.warps " << warps << " (a program runs 1 to 32 warps)";
  return warps;
}

mlir::RankedTensorType withLayout(mlir::Type tile, Layout layout) {
  auto t = mlir::cast<mlir::RankedTensorType>(tile);
  return mlir::RankedTensorType::get(t.getShape(), t.getElementType(), LayoutAttr::get(t.getContext(), layout));
}

void registerTileDialects(mlir::DialectRegistry &registry) {
  registry.insert<TileDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect, mlir::scf::SCFDialect,
                  mlir::tensor::TensorDialect, mlir::memref::MemRefDialect>();
}

namespace {

// Lanes and element type of a tile (a 1-D static tensor; ODS checked the rank).
int64_t lanesOf(mlir::Type t) { return mlir::cast<mlir::RankedTensorType>(t).getDimSize(0); }
mlir::Type elemOf(mlir::Type t) {
  if (auto r = mlir::dyn_cast<mlir::RankedTensorType>(t))
    return r.getElementType();
  if (auto m = mlir::dyn_cast<mlir::MemRefType>(t))
    return m.getElementType();
  return t;
}
bool isStaticTile(mlir::Type t) {
  auto r = mlir::dyn_cast<mlir::RankedTensorType>(t);
  return r && r.hasStaticShape() && r.getDimSize(0) > 0;
}

// Every tile operand and result has a static, positive lane count (a DSL tile<N x T>).
LogicalResult staticTiles(mlir::Operation *op) {
  for (mlir::Type t : op->getOperandTypes())
    if (mlir::isa<mlir::RankedTensorType>(t) && !isStaticTile(t))
      return op->emitOpError("needs tiles of a static, positive lane count, got ") << t;
  for (mlir::Type t : op->getResultTypes())
    if (mlir::isa<mlir::RankedTensorType>(t) && !isStaticTile(t))
      return op->emitOpError("needs tiles of a static, positive lane count, got ") << t;
  return success();
}

LogicalResult elementOfTile(mlir::Operation *op, mlir::Type tile, mlir::Type scalar) {
  if (elemOf(tile) != scalar)
    return op->emitOpError("result ") << scalar << " is not the element type of " << tile;
  return success();
}

} // namespace

LogicalResult ExtractOp::verify() {
  if (failed(staticTiles(*this)) || failed(elementOfTile(*this, getTile().getType(), getType())))
    return failure();
  const int64_t lane = getLaneAttr().getInt(); // signed: the text may say -1
  if (lane < 0 || lane >= lanesOf(getTile().getType()))
    return emitOpError("lane ") << lane << " out of [0, " << lanesOf(getTile().getType()) << ")";
  return success();
}

LogicalResult ExtractAtOp::verify() {
  if (failed(staticTiles(*this)))
    return failure();
  return elementOfTile(*this, getTile().getType(), getType());
}

LogicalResult ShuffleOp::verify() {
  if (failed(staticTiles(*this)))
    return failure();
  if (getLhs().getType() != getRhs().getType() || elemOf(getType()) != elemOf(getLhs().getType()))
    return emitOpError("needs two tiles of one type and a result of their element type");
  const int64_t in = 2 * lanesOf(getLhs().getType());
  if (static_cast<int64_t>(getMask().size()) != lanesOf(getType()))
    return emitOpError("mask of ") << getMask().size() << " lanes for a result of " << lanesOf(getType());
  for (int32_t m : getMask())
    if (m < 0 || m >= in)
      return emitOpError("lane ") << m << " out of [0, " << in << ")";
  return success();
}

namespace {
LogicalResult reduction(mlir::Operation *op, mlir::Type tile, mlir::Type result) {
  if (failed(staticTiles(op)) || failed(elementOfTile(op, tile, result)))
    return failure();
  if (!elemOf(tile).isF32() && !mlir::isa<mlir::IntegerType>(elemOf(tile)))
    return op->emitOpError("needs an f32 or integer tile, got ") << tile;
  return success();
}
} // namespace

LogicalResult ReduceAddOp::verify() { return reduction(*this, getTile().getType(), getType()); }
LogicalResult ReduceMaxOp::verify() { return reduction(*this, getTile().getType(), getType()); }

LogicalResult ReduceMaxGroupsOp::verify() {
  if (failed(staticTiles(*this)))
    return failure();
  const int64_t groups = getGroups(), lanes = lanesOf(getTile().getType());
  if (groups <= 0 || lanes % groups != 0 || lanesOf(getType()) != groups)
    return emitOpError("needs ") << groups << " groups dividing " << lanes << " lanes and as many result lanes";
  return success();
}

LogicalResult FoldMaxOp::verify() {
  if (failed(staticTiles(*this)))
    return failure();
  const int64_t d = getPairs(), lanes = lanesOf(getTile().getType());
  if (d <= 0 || (d & (d - 1)) != 0 || lanes % (2 * d) != 0 || lanesOf(getType()) != lanes / 2)
    return emitOpError("needs a power of two pairs whose double divides the ") << lanes
                                                                              << " lanes, and half the lanes out";
  return success();
}

namespace {
LogicalResult bufferValue(mlir::Operation *op, mlir::Type buffer, mlir::Type value) {
  if (failed(staticTiles(op)))
    return failure();
  if (elemOf(buffer) != elemOf(value))
    return op->emitOpError("value ") << value << " and buffer " << buffer << " of different element types";
  return success();
}
LogicalResult alignment(mlir::Operation *op, int32_t align) {
  if (align != 0 && (align < 0 || align > 16 || (align & (align - 1)) != 0))
    return op->emitOpError("alignment must be a power of two up to 16, got ") << align;
  return success();
}
} // namespace

LogicalResult LoadOp::verify() { return bufferValue(*this, getBuffer().getType(), getType()); }
LogicalResult LoadTileOp::verify() {
  if (failed(bufferValue(*this, getBuffer().getType(), getType())))
    return failure();
  return alignment(*this, getAlign());
}
LogicalResult LoadTileMaskedOp::verify() {
  if (failed(bufferValue(*this, getBuffer().getType(), getType())))
    return failure();
  return alignment(*this, getAlign());
}
LogicalResult LoadGatherOp::verify() {
  if (failed(bufferValue(*this, getBuffer().getType(), getType())))
    return failure();
  const int64_t lanes = lanesOf(getType());
  if (lanesOf(getOffsets().getType()) != lanes || lanesOf(getMask().getType()) != lanes)
    return emitOpError("offsets and mask must have the result's ") << lanes << " lanes";
  return success();
}
LogicalResult LoadRowsOp::verify() {
  if (failed(bufferValue(*this, getBuffer().getType(), getType())))
    return failure();
  const int64_t rows = lanesOf(getStarts().getType());
  if (lanesOf(getCounts().getType()) != rows || lanesOf(getType()) % rows != 0)
    return emitOpError("counts must have the starts' ") << rows << " lanes and the result a multiple of them";
  return alignment(*this, getAlign());
}
LogicalResult StoreOp::verify() { return bufferValue(*this, getBuffer().getType(), getValue().getType()); }
LogicalResult StoreTileOp::verify() { return bufferValue(*this, getBuffer().getType(), getValue().getType()); }
LogicalResult StoreScatterOp::verify() {
  if (failed(bufferValue(*this, getBuffer().getType(), getValue().getType())))
    return failure();
  const int64_t lanes = lanesOf(getValue().getType());
  if (lanesOf(getOffsets().getType()) != lanes || lanesOf(getMask().getType()) != lanes)
    return emitOpError("offsets and mask must have the value's ") << lanes << " lanes";
  return success();
}
LogicalResult AtomicAddOp::verify() {
  return bufferValue(*this, getBuffer().getType(), getValue().getType());
}

LogicalResult DecodeNvfp4Op::verify() {
  if (failed(staticTiles(*this)))
    return failure();
  const int64_t p = lanesOf(getPacked().getType()), s = lanesOf(getScales().getType());
  if (p != 8 * s || lanesOf(getType()) != 2 * p)
    return emitOpError("needs packed tile<8k x i8>, scales tile<k x i8> and a result of 16k keys");
  return success();
}

LogicalResult DotOp::verify() {
  if (failed(staticTiles(*this)))
    return failure();
  if (getLhs().getType() != getRhs().getType() || !elemOf(getLhs().getType()).isF32())
    return emitOpError("needs two f32 tiles of one length");
  return success();
}

LogicalResult DotTilesOp::verify() {
  if (failed(staticTiles(*this)))
    return failure();
  mlir::Type ea = elemOf(getLhs().getType()), eb = elemOf(getRhs().getType());
  const int64_t k = getK(), a = lanesOf(getLhs().getType()), b = lanesOf(getRhs().getType());
  if (ea != eb || !(ea.isF32() || mlir::isa<mlir::Float8E4M3FNType>(ea)))
    return emitOpError("needs two f32 or two f8E4M3FN tiles");
  if (k <= 0 || a % k != 0 || b % k != 0 || lanesOf(getType()) != (a / k) * (b / k))
    return emitOpError("needs whole rows of ") << k << " lanes and (rows of a) x (rows of b) result lanes";
  return success();
}

LogicalResult ConvertLayoutOp::verify() {
  if (failed(staticTiles(*this)))
    return failure();
  if (lanesOf(getTile().getType()) != lanesOf(getType()) || elemOf(getTile().getType()) != elemOf(getType()))
    return emitOpError("needs a result of the tile's lanes and element type");
  if (layoutOf(getTile().getType()) == layoutOf(getType()))
    return emitOpError("converts ") << stringifyLayout(layoutOf(getType())) << " to itself";
  return success();
}

LogicalResult StageOp::verify() {
  if (getValues().empty() || getValues().size() != getResults().size())
    return emitOpError("needs as many results as values, at least one");
  for (auto [v, r] : llvm::zip(getValues(), getResults()))
    if (v.getType() != r.getType())
      return emitOpError("result types must be the values' types");
  if (getStages() < 2 || getStages() > 8)
    return emitOpError("needs 2 to 8 stages, got ") << getStages();
  if (!mlir::isa_and_nonnull<mlir::scf::ForOp>((*this)->getParentOp()))
    return emitOpError("must be in an scf.for's body");
  return success();
}

LogicalResult PackScoreKeyOp::verify() {
  if (failed(staticTiles(*this)))
    return failure();
  auto lanes = [](mlir::Type t) { return mlir::isa<mlir::RankedTensorType>(t) ? lanesOf(t) : 0; };
  const int64_t n = lanes(getScore().getType());
  if (lanes(getBlock().getType()) != n || lanes(getType()) != n)
    return emitOpError("needs scores, blocks and keys of one shape");
  return success();
}

} // namespace m3idx::tile
