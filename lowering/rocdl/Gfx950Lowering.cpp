// gfx950's side of the DSL -> MLIR step (lowering/TargetLowering.h): a program is one wave of 64
// lanes (shuffles reach the whole program, barriers are the workgroup's), dot.tiles of 16 keys on
// one v_mfma_f32_16x16x128_f8f6f4, and the NVFP4 decode through v_cvt_scalef32_pk_f32_fp4.
#include "lowering/EmitterImpl.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <fmt/format.h>

#include "core/Spec.h"

namespace m3idx::lowering {

class Gfx950Lowering final : public TargetLowering {
public:
  const char *name() const override { return "gfx950"; }
  bool distributed() const override { return true; }
  const char *deviceSyncScope() const override { return "agent"; }
  Status checkProgram(const dsl::Kernel &k) const override {
    if (k.warps == 1)
      return Status();
    return Status::error(
        fmt::format("kernel @{}: {} warps per program: gfx950 programs are one wave", k.name, k.warps));
  }
  DotUnit dotUnit(const Emitter &e, const dsl::Op &op) const override {
    return e.mfmaFits(op) ? DotUnit::Mfma : DotUnit::Ffma;
  }
  mlir::Value matrixDot(Emitter &e, const dsl::Op &op, DotUnit) const override { return e.mfmaDotTiles(op); }
  void stageMatrixB(Emitter &e, dsl::ValueId v, mlir::Value staged, int64_t rows) const override {
    e.mfmaB_[v.id] = e.mfmaFragmentB(staged, rows, spec::kIndexHeadDim);
  }
  mlir::Value decodeNvfp4(Emitter &e, mlir::Value packed, mlir::Value scales) const override {
    return e.gfx950DecodeNvfp4(packed, scales);
  }
};

const TargetLowering &gfx950Lowering() {
  static const Gfx950Lowering lowering;
  return lowering;
}

} // namespace m3idx::lowering
