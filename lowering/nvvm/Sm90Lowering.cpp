// sm_90's side of the DSL -> MLIR step (lowering/TargetLowering.h): 32-lane warps (a warp's own
// barrier where a program is one), keys and dot results in mma fragment orders (MmaSpread.h),
// dot.tiles on mma.sync or, in warpgroup programs, on wgmma (and nothing else there), the NVFP4
// decode through shared-memory key tables, and a register budget per program.
#include "lowering/EmitterImpl.h"
#include "lowering/nvvm/MmaSpread.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/Spec.h"

namespace m3idx::lowering {

// One kernel's sm_90 emitting. Its state and emitting code are still the Emitter's (sm90_,
// nvvm/Sm90Emitter.cpp, nvvm/Sm90Wgmma.cpp), which this program drives.
class Sm90Program final : public TargetProgram {
public:
  explicit Sm90Program(Emitter &e) : e(e) {}

  std::vector<Spread> assignSpreads() override {
    return assignMmaSpreads(
        e.k_, [&](const dsl::Op &op) { return e.mmaFits(op); }, [&](const dsl::Op &op) { return e.wgmmaFits(op); });
  }

  // A warpgroup's dot of few columns runs as each warp's own mma.sync on its 16 tokens
  // (Emitter::warpMmaTakes): the same WgmmaAcc result, without wgmma's fences and waits.
  DotUnit dotUnit(const dsl::Op &op) const override {
    if (e.wgmmaRuns(op))
      return Emitter::warpMmaTakes(e.k_.typeOf(op.operands[1]).lanes / spec::kIndexHeadDim) ? DotUnit::MmaSync
                                                                                          : DotUnit::Wgmma;
    return e.mmaRuns(op) ? DotUnit::MmaSync : DotUnit::Ffma;
  }

  // Programs of several warps exist for warpgroup dots (the prefill form, wide decode requests):
  // a dot that cannot take one is refused rather than run, much slower, on FFMA.
  Status checkDot(const dsl::Op &op, DotUnit unit) const override {
    if (e.k_.warps == 1 || unit == DotUnit::Wgmma || (unit == DotUnit::MmaSync && e.wgmmaRuns(op)))
      return Status();
    return Status::error(fmt::format(
        "kernel @{}: dot.tiles of {} x {} lanes (k = {}) in a {}-warp sm_90 program does not lower to wgmma "
        "(it takes {} MmaRows key tokens against 8 to 128 columns, a multiple of 8, of {} e4m3 lanes{}){}",
        e.k_.name, e.k_.typeOf(op.operands[0]).lanes, e.k_.typeOf(op.operands[1]).lanes, op.intAttr, e.k_.warps,
        Emitter::kWgmmaTokens, spec::kIndexHeadDim, e.wgmmaFits(op) ? "; these keys are not in MmaRows order" : "",
        Emitter::sourceOf(op)));
  }

  mlir::Value matrixDot(const dsl::Op &op, DotUnit unit) override {
    return unit == DotUnit::Wgmma ? e.wgmmaDotTiles(op) : e.mmaDotTiles(op); // either warp count
  }

  void stageMatrixB(dsl::ValueId v, mlir::Value staged, int64_t rows) override {
    if (Emitter::mmaBInShared(rows)) {
      e.mmaFragmentsToShared(staged, rows);
      e.sm90_.mmaBShared[v.id] = staged;
    } else {
      e.mfmaB_[v.id] = e.mmaFragmentsB(staged, rows);
    }
  }

  mlir::Value decodeNvfp4(mlir::Value packed, mlir::Value scales) override { return e.sm90DecodeNvfp4(packed, scales); }
  // The key table's fill (a few hundred instructions) here instead of at the program's start
  // (where wgmma programs keep it: prefill spilled more), where it sat in front of the first
  // metadata load in every program's dependent chain.
  void beforeStaging() override {
    if (e.sm90_.keyWords)
      e.sm90KeyWordsReady();
  }

  void annotate(mlir::gpu::GPUFuncOp fn) const override {
    const int32_t cap = e.sm90_.wgmmaB.empty() ? Emitter::sm90RegisterCap(e.sm90_.mmaColumns, e.sm90_.keyTilesInFlight)
                                          : Emitter::wgmmaRegisterCap(e.sm90_.wgmmaColumns, e.sm90_.keyTilesInFlight);
    if (cap)
      fn->setAttr(mlir::NVVM::NVVMDialect::getMaxnregAttrName(),
                  mlir::IntegerAttr::get(mlir::IntegerType::get(fn.getContext(), 32), cap));
  }

  int64_t loopUnroll(const dsl::Op &forOp) const override { return e.sm90LoopUnroll(forOp); }

private:
  Emitter &e;
};

namespace {

class Sm90Lowering final : public TargetLowering {
public:
  const char *name() const override { return "sm_90"; }
  bool distributed() const override { return true; }
  std::unique_ptr<TargetProgram> program(Emitter &e) const override { return std::make_unique<Sm90Program>(e); }
  int shuffleWidth(int threads) const override { return std::min(threads, 32); }
  const char *deviceSyncScope() const override { return "device"; } // PTX's .gpu

  // A one-warp program's barrier only has to order that warp's shared-memory accesses:
  // bar.warp.sync (all lanes) does, and is cheaper than a CTA barrier.
  void barrier(mlir::ImplicitLocOpBuilder &b, int threads) const override {
    if (threads == 32)
      mlir::NVVM::SyncWarpOp::create(b, mlir::arith::ConstantOp::create(b, b.getI32IntegerAttr(-1)));
    else
      mlir::gpu::BarrierOp::create(b);
  }
  bool keyTables() const override { return true; }
};

} // namespace

const TargetLowering &sm90Lowering() {
  static const Sm90Lowering lowering;
  return lowering;
}

} // namespace m3idx::lowering
