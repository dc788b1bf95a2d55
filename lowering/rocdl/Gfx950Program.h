// One kernel's gfx950 emitting (TargetProgram; rocdl/Gfx950Program.cpp): the NVFP4 decode through
// the CDNA4 conversion instructions, and dot.tiles of 16 keys on one v_mfma_f32_16x16x128_f8f6f4
// with each staged b's B fragment made once, where b is staged. Internal to lowering/.
#pragma once

#include <map>

#include "lowering/EmitterImpl.h"

namespace m3idx::lowering {

class Gfx950Program final : public TargetProgram {
public:
  explicit Gfx950Program(Emitter &e) : e_(e), b_(e.builder()), k_(e.kernel()) {}

  DotUnit dotUnit(const dsl::Op &op) const override { return fits(op) ? DotUnit::Mfma : DotUnit::Ffma; }
  mlir::Value matrixDot(const dsl::Op &op, DotUnit) override { return dotTiles(op); }
  void stageMatrixB(dsl::ValueId v, mlir::Value staged, int64_t rows) override;
  mlir::Value decodeNvfp4(mlir::Value packed, mlir::Value scales) override;

private:
  bool fits(const dsl::Op &dotTiles) const; // the shapes one MFMA takes
  mlir::Value fragmentB(mlir::Value stagedBytes, int64_t rows, int64_t k);
  mlir::Value dotTiles(const dsl::Op &op);

  Emitter &e_;
  ImplicitLocOpBuilder &b_;
  const dsl::Kernel &k_;
  std::map<int32_t, mlir::Value> fragmentsB_; // b operand id -> this lane's B fragment
};

} // namespace m3idx::lowering
