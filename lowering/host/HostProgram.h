// The host's side of one kernel's emitting (TargetProgram): ops on tiles wider than
// HostTiles::kPiece lanes as loops over pieces (host/HostOps.cpp), dot.tiles as loops over rows
// against b widened to f32 once where it is defined, and the NVFP4 decode in target-neutral arith.
// Internal to lowering/.
#pragma once

#include <map>
#include <vector>

#include "lowering/EmitterImpl.h"
#include "lowering/host/HostTiles.h"

namespace m3idx::lowering {

class HostProgram final : public TargetProgram {
public:
  explicit HostProgram(Emitter &e)
      : e_(e), b_(e.builder()), k_(e.kernel()), values_(e.values()), dotStage_(e.stagedDotOperands()), tiles_(e) {}

  mlir::Value decodeNvfp4(mlir::Value packed, mlir::Value scales) override {
    return decodeNvfp4Exact(b_, packed, scales);
  }
  void beginFunction(mlir::Block *entry) override;
  bool ownsOp(const dsl::Op &op) const override; // ops on wide tiles, regions, dots, decodes
  void emitOwnedOp(const dsl::Op &op) override;
  void defined(const dsl::Op &op) override;

private:
  void elementwise(const dsl::Op &op);
  void reduce(const dsl::Op &op);
  void reduceMaxGroups(const dsl::Op &op);
  void foldMax(const dsl::Op &op);
  void shuffle(const dsl::Op &op);
  void memoryOp(const dsl::Op &op);
  void decodeWide(const dsl::Op &op);
  mlir::Value widenRows(dsl::ValueId b, int64_t k);
  void dotTiles(const dsl::Op &op);
  void emitFor(const dsl::Op &op);
  void emitIf(const dsl::Op &op);
  void emitYield(const dsl::Op &op);

  Emitter &e_;
  ImplicitLocOpBuilder &b_;
  const dsl::Kernel &k_;
  std::vector<mlir::Value> &values_;
  std::map<int32_t, mlir::Value> &dotStage_;
  HostTiles tiles_;
  mlir::ModuleOp module_;
  std::map<int32_t, int64_t> dotB_;               // dot.tiles b operand id -> row length
  std::vector<std::vector<mlir::Value>> yieldTo_; // per open region: each yielded wide value's buffer
  int shuffleTables_ = 0;
};

} // namespace m3idx::lowering
