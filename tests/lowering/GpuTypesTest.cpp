// A GPU program's types from the tile types' layout encodings (lowering/GpuTypes.h): blocked
// tiles per thread, scalars and buffers as they are, a layout no target conversion takes refused.
#include <gtest/gtest.h>

#include "lowering/GpuTypes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "tile/FromDsl.h"
#include "tile/TileDialect.h"

using namespace m3idx;

namespace {

class GpuTypes : public ::testing::Test {
protected:
  GpuTypes() { tile::loadTileDialects(ctx); }
  mlir::RankedTensorType tile(int64_t lanes, mlir::Type elem, tile::Layout layout = tile::Layout::Blocked) {
    return tile::withLayout(mlir::RankedTensorType::get({lanes}, elem), layout);
  }
  mlir::MLIRContext ctx;
  mlir::Type i8 = mlir::IntegerType::get(&ctx, 8), f32 = mlir::Float32Type::get(&ctx);
};

TEST_F(GpuTypes, BlockedTilesSpreadOverThePrograms) {
  lowering::GpuTypeConverter warp(32), group(128);
  EXPECT_EQ(warp.convertType(tile(2048, i8)), mlir::VectorType::get({64}, i8)); // 64 consecutive lanes a thread
  EXPECT_EQ(group.convertType(tile(2048, i8)), mlir::VectorType::get({16}, i8));
  EXPECT_EQ(warp.convertType(tile(16, f32)), mlir::VectorType::get({1}, f32)); // thread t holds lane t
  // A tile with no encoding is blocked.
  EXPECT_EQ(warp.convertType(mlir::RankedTensorType::get({64}, f32)), mlir::VectorType::get({2}, f32));
}

TEST_F(GpuTypes, ScalarsAndBuffersStay) {
  lowering::GpuTypeConverter warp(32);
  auto buffer = mlir::MemRefType::get({mlir::ShapedType::kDynamic}, f32);
  EXPECT_EQ(warp.convertType(f32), f32);
  EXPECT_EQ(warp.convertType(buffer), buffer);
}

// sm_90's fragment orders are its program's conversions (Sm90Program::addTypeConversions); without
// them a tile in one has no type, which the emitter reports as an error naming the layout.
TEST_F(GpuTypes, ATargetsOwnLayoutNeedsItsConversion) {
  lowering::GpuTypeConverter warp(32);
  EXPECT_FALSE(warp.convertType(tile(2048, i8, tile::Layout::MmaRows)));
  EXPECT_FALSE(warp.convertType(tile(64, f32, tile::Layout::WgmmaAcc)));
  warp.addConversion([&](mlir::RankedTensorType t) -> std::optional<mlir::Type> {
    if (tile::layoutOf(t) != tile::Layout::MmaRows)
      return std::nullopt;
    return mlir::VectorType::get({t.getDimSize(0) / 32}, t.getElementType());
  });
  EXPECT_EQ(warp.convertType(tile(2048, i8, tile::Layout::MmaRows)), mlir::VectorType::get({64}, i8));
  EXPECT_EQ(warp.convertType(tile(2048, i8)), mlir::VectorType::get({64}, i8)); // blocked still the common form
}

} // namespace
