// gfx950's own pattern (TargetProgram::addPatterns), before the common FFMA one: a dot_tiles of 16
// keys on one v_mfma_f32_16x16x128_f8f6f4 (rocdl/Gfx950Program.cpp). Its tiles are all blocked.
#include "lowering/GpuPatterns.h"
#include "lowering/rocdl/Gfx950Program.h"

namespace m3idx::lowering {

using namespace mlir;

namespace {

class MfmaDotTilesLowering final : public GpuPattern<tile::DotTilesOp> {
public:
  MfmaDotTilesLowering(const TypeConverter &converter, MLIRContext *ctx, Gfx950Program &program)
      : GpuPattern(converter, ctx, program.kernel(), /*benefit=*/2), p_(program) {}

private:
  LogicalResult takes(tile::DotTilesOp op) const override { return success(p_.fits(op)); }
  SmallVector<mlir::Value> lower(tile::DotTilesOp op, Adaptor) const override { return {p_.dotTiles(op)}; }

  Gfx950Program &p_;
};

} // namespace

void Gfx950Program::addPatterns(const TypeConverter &types, RewritePatternSet &patterns) {
  patterns.add<MfmaDotTilesLowering>(types, patterns.getContext(), *this);
}

} // namespace m3idx::lowering
