#include "lowering/TargetLowering.h"

#include "lowering/GpuKernelState.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace m3idx::lowering {

const char *dotUnitName(DotUnit u) {
  switch (u) {
  case DotUnit::Ffma: return "ffma";
  case DotUnit::MmaSync: return "mma.sync";
  case DotUnit::Wgmma: return "wgmma";
  case DotUnit::Mfma: return "mfma";
  }
  return "?";
}

// The common forms: FFMA dots stage b as f32 and write their results to workgroup memory; a
// matrix unit takes b's bytes and keeps its results in registers.
StatusOr<TargetProgram::DotStaging> TargetProgram::planDot(tile::DotTilesOp, DotUnit unit, int64_t bLanes) {
  const bool matrix = unit != DotUnit::Ffma;
  return DotStaging{bLanes, matrix, 0, matrix};
}

void TargetLowering::barrier(mlir::ImplicitLocOpBuilder &b, int) const { mlir::gpu::BarrierOp::create(b); }

mlir::LogicalResult TargetLowering::assignLayouts(mlir::func::FuncOp fn, int) const {
  fn.walk([](mlir::Operation *op) {
    for (mlir::Region &r : op->getRegions())
      for (mlir::Block &b : r)
        for (mlir::BlockArgument a : b.getArguments())
          if (mlir::isa<mlir::RankedTensorType>(a.getType()))
            a.setType(tile::withLayout(a.getType(), Spread::Blocked));
    for (mlir::Value v : op->getResults())
      if (mlir::isa<mlir::RankedTensorType>(v.getType()))
        v.setType(tile::withLayout(v.getType(), Spread::Blocked));
  });
  return mlir::success();
}

} // namespace m3idx::lowering
