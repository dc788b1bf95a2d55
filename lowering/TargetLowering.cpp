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

void TargetLowering::barrier(mlir::ImplicitLocOpBuilder &b, int) const { mlir::gpu::BarrierOp::create(b); }

} // namespace m3idx::lowering
