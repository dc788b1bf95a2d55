#include "lowering/TargetLowering.h"

#include "lowering/EmitterImpl.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace m3idx::lowering {

const char *spreadName(Spread s) {
  switch (s) {
  case Spread::Blocked: return "blocked";
  case Spread::MmaRows: return "mma.rows";
  case Spread::MmaAcc: return "mma.acc";
  case Spread::WgmmaAcc: return "wgmma.acc";
  case Spread::WgmmaAccFolded: return "wgmma.acc.folded";
  }
  return "?";
}

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
StatusOr<TargetProgram::DotStaging> TargetProgram::planDot(const dsl::Op &, DotUnit unit, int64_t bLanes) {
  const bool matrix = unit != DotUnit::Ffma;
  return DotStaging{bLanes, matrix, 0, matrix};
}

void TargetLowering::barrier(mlir::ImplicitLocOpBuilder &b, int) const { mlir::gpu::BarrierOp::create(b); }

} // namespace m3idx::lowering
