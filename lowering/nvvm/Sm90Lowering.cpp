// sm_90's side of the DSL -> MLIR step (lowering/TargetLowering.h): 32-lane warps (a warp's own
// barrier where a program is one), keys and dot results in mma fragment orders (Sm90Layouts.h),
// dot.tiles on mma.sync or, in warpgroup programs, on wgmma (and nothing else there), the NVFP4
// decode through shared-memory key tables, and a register budget per program. Here: the target's
// facts, and its program's (nvvm/Sm90Program.h) answers to the common patterns.
#include "lowering/nvvm/Sm90Layouts.h"
#include "lowering/nvvm/Sm90Program.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/Spec.h"

namespace m3idx::lowering {

using namespace mlir;

// A warpgroup's dot of few columns runs as each warp's own mma.sync on its 16 tokens
// (warpMmaTakes): the same WgmmaAcc result, without wgmma's fences and waits.
DotUnit Sm90Program::dotUnit(tile::DotTilesOp op) const {
  if (wgmma_.wgmmaRuns(op))
    return Sm90Wgmma::warpMmaTakes(cast<ShapedType>(op.getRhs().getType()).getNumElements() / spec::kIndexHeadDim)
               ? DotUnit::MmaSync
                                                                                          : DotUnit::Wgmma;
  return mma_.mmaRuns(op) ? DotUnit::MmaSync : DotUnit::Ffma;
}

// Programs of several warps exist for warpgroup dots (the prefill form, wide decode requests):
// a dot that cannot take one is refused rather than run, much slower, on FFMA.
Status Sm90Program::checkDot(tile::DotTilesOp op, DotUnit unit) const {
  if (e_.warps() == 1 || unit == DotUnit::Wgmma || (unit == DotUnit::MmaSync && wgmma_.wgmmaRuns(op)))
    return Status();
  return Status::error(fmt::format(
      "kernel @{}: dot.tiles of {} x {} lanes (k = {}) in a {}-warp sm_90 program does not lower to wgmma "
      "(it takes {} MmaRows key tokens against 8 to 128 columns, a multiple of 8, of {} e4m3 lanes{}){}",
      e_.kernelName().str(), cast<ShapedType>(op.getLhs().getType()).getNumElements(),
      cast<ShapedType>(op.getRhs().getType()).getNumElements(), op.getK(), e_.warps(), Sm90Wgmma::kWgmmaTokens,
      spec::kIndexHeadDim, wgmma_.wgmmaFits(op) ? "; these keys are not in MmaRows order" : "",
      sourceOf(op.getLoc())));
}

// A warpgroup's dot, on wgmma or on each warp's mma.sync, keeps its results in WgmmaAcc registers
// and its program's column maxima in an exchange (one N per program); a warp's mma.sync keeps
// them in MmaAcc registers where they are read so.
StatusOr<TargetProgram::DotStaging> Sm90Program::planDot(tile::DotTilesOp op, DotUnit unit, int64_t bLanes) {
  const bool mma = unit == DotUnit::MmaSync, wgmma = unit == DotUnit::Wgmma;
  const int64_t N = bLanes / static_cast<int64_t>(op.getK());
  if (mma)
    state_.mmaColumns = std::max(state_.mmaColumns, N);
  const Spread result = tile::layoutOf(op.getType());
  const bool warpgroup = wgmma || (mma && result == Spread::WgmmaAcc);
  if (wgmma && result != Spread::WgmmaAcc) // no blocked copy of 64 x 64 results
    return Status::error(fmt::format("kernel @{}: the wgmma dot.tiles result is read in blocked order "
                                     "(on sm_90 warpgroup programs only elementwise ops, loop-carried "
                                     "values and a reduce.max.groups of 64 may read it)",
                                     e_.kernelName().str()) + sourceOf(op.getLoc()));
  if (warpgroup && state_.wgmmaColumns && state_.wgmmaColumns != N)
    return Status::error(fmt::format("kernel @{}: warpgroup dot.tiles of {} and {} columns in one program",
                                     e_.kernelName().str(), state_.wgmmaColumns, N) + sourceOf(op.getLoc()));
  if (wgmma)
    state_.wgmmaB.insert(op.getRhs());
  if (warpgroup)
    state_.wgmmaColumns = N;
  // wgmma's B: 64 columns x 128 as swizzled f16, 1024-byte aligned (the swizzle's period)
  DotStaging s;
  s.elements = wgmma ? 2 * bLanes : mma ? mma_.mmaStageBytes(bLanes) : bLanes;
  s.bytes = mma || wgmma;
  s.align = wgmma ? 1024 : 0;
  s.resultInRegisters = (mma && result == Spread::MmaAcc) || warpgroup;
  return s;
}

void Sm90Program::stageMatrixB(mlir::Value b, mlir::Value staged, int64_t rows) {
  if (Sm90Mma::mmaBInShared(rows)) {
    mma_.mmaFragmentsToShared(staged, rows);
    state_.mmaBShared[b] = staged;
  } else {
    state_.fragmentsB[b] = mma_.mmaFragmentsB(staged, rows);
  }
}

bool Sm90Program::stageOwnLayout(mlir::Value b, mlir::Value buf, mlir::Value val) {
  if (!state_.wgmmaB.count(b))
    return false;
  // widened into B's layout, through B's own buffer
  wgmma_.wgmmaStageColumns(buf, val, cast<ShapedType>(b.getType()).getNumElements());
  return true;
}

// The key table's fill (a few hundred instructions) here instead of at the program's start
// (where wgmma programs keep it: prefill spilled more), where it sat in front of the first
// metadata load in every program's dependent chain.
void Sm90Program::beforeStaging() {
  if (state_.keyWords)
    keys_.sm90KeyWordsReady();
}

// Programmatic dependent launch (the runtime launches a kernel that awaits with the attribute
// that lets it start early): griddepcontrol as inline PTX with a memory clobber, since LLVM's
// intrinsics for it are marked as touching no memory, and a load of the scores moved above the
// wait would read the last step's.
void Sm90Program::orderGrids(bool await) {
  const char *text = await ? "griddepcontrol.wait;" : "griddepcontrol.launch_dependents;";
  LLVM::InlineAsmOp::create(b_, TypeRange{}, ValueRange{}, text, "~{memory}", /*has_side_effects=*/true,
                            /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                            LLVM::AsmDialectAttr(), ArrayAttr());
}

void Sm90Program::annotate(gpu::GPUFuncOp fn, int64_t keyTilesInFlight) {
  const int32_t cap = state_.wgmmaB.empty() ? sm90RegisterCap(state_.mmaColumns, keyTilesInFlight)
                                           : Sm90Wgmma::wgmmaRegisterCap(state_.wgmmaColumns, keyTilesInFlight);
  if (cap)
    fn->setAttr("nvvm.maxnreg", IntegerAttr::get(IntegerType::get(fn.getContext(), 32), cap));
}

// mma.sync accumulators to blocked through shared memory; a warpgroup's 64-token results have no
// blocked copy (only elementwise ops, loop-carried values and a group reduction may read them).
mlir::Value Sm90Program::convertLayout(int64_t lanes, mlir::Value v, Spread from, Spread to, mlir::Value buffer) {
  if (from == Spread::MmaAcc && to == Spread::Blocked)
    return mma_.accToBlocked(v, lanes, buffer);
  if (from == Spread::WgmmaAcc && to == Spread::Blocked) {
    e_.fail(fmt::format("kernel @{}: the wgmma dot.tiles result is read in blocked order (on sm_90 warpgroup "
                        "programs only elementwise ops, loop-carried values and a reduce.max.groups of 64 may read it)",
                        e_.kernelName().str()));
    return v;
  }
  return {};
}

// A thread's registers of a tile in each fragment order (Spread.h says which lanes they hold).
void Sm90Program::addTypeConversions(mlir::TypeConverter &types) {
  types.addConversion([this](RankedTensorType tile) -> std::optional<mlir::Type> {
    const int64_t lanes = tile.getDimSize(0);
    mlir::Type elem = tile.getElementType();
    switch (tile::layoutOf(tile)) {
    case Spread::Blocked: return std::nullopt; // the common blocked form
    case Spread::MmaRows: {
      const bool widened = mma_.mmaRowsWidened(lanes, elem.getIntOrFloatBitWidth());
      return VectorType::get({lanes / (widened ? 32 : threads_)}, widened ? b_.getI32Type() : elem);
    }
    case Spread::MmaAcc: return VectorType::get({4 * ((lanes / 16 + 7) / 8)}, elem);
    case Spread::WgmmaAcc: case Spread::WgmmaAccFolded: return VectorType::get({lanes / threads_}, elem);
    }
    return std::nullopt;
  });
}

// The program's workgroup buffers and tables, in this order: the exchange's turn (a scalar LLVM
// keeps in a register), the f32 key table, the shared key table (wgmma programs fill it first;
// others at the first staging or decode, beforeStaging).
void Sm90Program::bind(mlir::Value exchange, bool keysAsF32, mlir::Value keyWords) {
  state_.wgmmaExchange = exchange;
  if (state_.wgmmaColumns) {
    state_.wgmmaExchangeAt = memref::AllocaOp::create(b_, MemRefType::get({1}, b_.getI64Type()));
    mlir::Value zero = constant(b_, b_.getI64Type(), 0);
    memref::StoreOp::create(b_, zero, state_.wgmmaExchangeAt, ValueRange{toIndex(b_, zero)});
  }
  if (keysAsF32)
    state_.keyTable = memref::GetGlobalOp::create(b_, MemRefType::get({16 * 256}, b_.getF32Type()), "m3idx_nvfp4_keys");
  if (keyWords) {
    state_.keyWords = keyWords;
    if (!state_.wgmmaB.empty())
      keys_.sm90KeyWordsReady();
  }
}

namespace {

class Sm90Lowering final : public TargetLowering {
public:
  const char *name() const override { return "sm_90"; }
  std::unique_ptr<TargetProgram> program(GpuKernelState &e) const override { return std::make_unique<Sm90Program>(e); }
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
  mlir::LogicalResult assignLayouts(mlir::func::FuncOp fn, int threads) const override {
    return assignSm90Layouts(fn, threads);
  }
};

} // namespace

const TargetLowering &sm90Lowering() {
  static const Sm90Lowering lowering;
  return lowering;
}

} // namespace m3idx::lowering
