// sm_90's own patterns (TargetProgram::addPatterns), before the common blocked ones: dot_tiles on
// mma.sync or wgmma, and the ops on tiles in its fragment layouts (Spread.h): iota in accumulator
// order, fold_max and reduce_max_groups of accumulators, loads of tiles in mma row order. They
// emit with the kernel's Sm90Program parts (nvvm/Sm90Program.h).
#include "lowering/GpuPatterns.h"
#include "lowering/nvvm/Sm90Program.h"

namespace m3idx::lowering {

using namespace mlir;
using Values = SmallVector<mlir::Value>;

namespace {

constexpr int kBeforeBlocked = 2; // the benefit: tried before the common pattern of the op

Spread layoutOf(mlir::Value v) { return tile::layoutOf(v.getType()); }
int64_t lanesOf(mlir::Value tile) { return cast<ShapedType>(tile.getType()).getNumElements(); }

// A pattern of the kernel's sm_90 program.
template <typename SourceOp>
class Sm90Pattern : public GpuPattern<SourceOp> {
public:
  Sm90Pattern(const TypeConverter &converter, MLIRContext *ctx, Sm90Program &program)
      : GpuPattern<SourceOp>(converter, ctx, program.kernel(), kBeforeBlocked), p_(program) {}

protected:
  Sm90Program &p_;
};

// On the tensor cores where the program planned it so (keys in MmaRows order): a warpgroup's on
// wgmma or each warp's mma.sync, a warp's on mma.sync.
class MatrixDotTilesLowering final : public Sm90Pattern<tile::DotTilesOp> {
  using Sm90Pattern::Sm90Pattern;
  LogicalResult takes(tile::DotTilesOp op) const override { return success(p_.dotUnit(op) != DotUnit::Ffma); }
  Values lower(tile::DotTilesOp op, Adaptor) const override {
    return {p_.dotUnit(op) == DotUnit::Wgmma ? p_.wgmma().wgmmaDotTiles(op) : p_.mma().mmaDotTiles(op)};
  }
};

class AccIotaLowering final : public Sm90Pattern<tile::IotaOp> {
  using Sm90Pattern::Sm90Pattern;
  LogicalResult takes(tile::IotaOp op) const override {
    return success(layoutOf(op) == Spread::MmaAcc || layoutOf(op) == Spread::WgmmaAcc);
  }
  Values lower(tile::IotaOp op, Adaptor) const override {
    const int64_t lanes = lanesOf(op);
    return {layoutOf(op) == Spread::MmaAcc ? p_.mma().mmaAccIota(lanes) : p_.wgmma().wgmmaAccIota(lanes)};
  }
};

class AccFoldMaxLowering final : public Sm90Pattern<tile::FoldMaxOp> {
  using Sm90Pattern::Sm90Pattern;
  LogicalResult takes(tile::FoldMaxOp op) const override { return success(layoutOf(op.getTile()) == Spread::WgmmaAcc); }
  Values lower(tile::FoldMaxOp op, Adaptor a) const override {
    return {p_.wgmma().wgmmaAccFoldMax(a.getTile(), static_cast<int64_t>(op.getPairs()), layoutOf(op))};
  }
};

class AccReduceMaxGroupsLowering final : public Sm90Pattern<tile::ReduceMaxGroupsOp> {
  using Sm90Pattern::Sm90Pattern;
  LogicalResult takes(tile::ReduceMaxGroupsOp op) const override {
    const Spread s = layoutOf(op.getTile());
    return success(s == Spread::MmaAcc || s == Spread::WgmmaAcc || s == Spread::WgmmaAccFolded);
  }
  Values lower(tile::ReduceMaxGroupsOp op, Adaptor a) const override {
    const Spread s = layoutOf(op.getTile());
    const int64_t groups = static_cast<int64_t>(op.getGroups());
    return {s == Spread::MmaAcc ? p_.mma().mmaAccReduceMaxGroups(a.getTile(), groups)
                                : p_.wgmma().wgmmaAccReduceMaxGroups(a.getTile(), groups, s == Spread::WgmmaAccFolded)};
  }
};

class MmaRowsLoadTileLowering final : public Sm90Pattern<tile::LoadTileOp> {
  using Sm90Pattern::Sm90Pattern;
  LogicalResult takes(tile::LoadTileOp op) const override { return success(layoutOf(op) == Spread::MmaRows); }
  Values lower(tile::LoadTileOp op, Adaptor a) const override {
    auto t = cast<ShapedType>(op.getType());
    return {p_.mma().mmaRowsLoadTile(a.getBuffer(), a.getOffset(), t.getNumElements(), t.getElementType(),
                                     static_cast<int64_t>(op.getAlign()))};
  }
};

} // namespace

void Sm90Program::addPatterns(const TypeConverter &types, RewritePatternSet &patterns) {
  patterns.add<MatrixDotTilesLowering, AccIotaLowering, AccFoldMaxLowering, AccReduceMaxGroupsLowering,
               MmaRowsLoadTileLowering>(
      types, patterns.getContext(), *this);
}

} // namespace m3idx::lowering
