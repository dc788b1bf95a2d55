// One kernel's gfx950 emitting (TargetProgram; rocdl/Gfx950Program.cpp): the NVFP4 decode through
// the CDNA4 conversion instructions, and dot.tiles of 16 keys on one v_mfma_f32_16x16x128_f8f6f4
// with each staged b's B fragment made once, where b is staged. Internal to lowering/.
#pragma once

#include <map>

#include "lowering/GpuKernelState.h"

namespace m3idx::lowering {

class Gfx950Program final : public TargetProgram {
public:
  explicit Gfx950Program(GpuKernelState &e) : e_(e), b_(e.builder()) {}

  DotUnit dotUnit(tile::DotTilesOp op) const override { return fits(op) ? DotUnit::Mfma : DotUnit::Ffma; }
  void stageMatrixB(mlir::Value b, mlir::Value staged, int64_t rows) override;
  mlir::Value decodeNvfp4(mlir::Value packed, mlir::Value scales) override;
  // dot_tiles on MFMA (rocdl/Gfx950Patterns.cpp).
  void addPatterns(const mlir::TypeConverter &types, mlir::RewritePatternSet &patterns) override;

  bool fits(tile::DotTilesOp dotTiles) const; // the shapes one MFMA takes
  mlir::Value dotTiles(tile::DotTilesOp op);  // on one MFMA
  GpuKernelState &kernel() { return e_; }

private:
  mlir::Value fragmentB(mlir::Value stagedBytes, int64_t rows, int64_t k);

  GpuKernelState &e_;
  ImplicitLocOpBuilder &b_;
  llvm::DenseMap<mlir::Value, mlir::Value> fragmentsB_; // b operand -> this lane's B fragment
};

} // namespace m3idx::lowering
