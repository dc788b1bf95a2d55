// What differs between the GPU targets in the conversion of the tile form, as two interfaces:
// TargetLowering (a target's facts, one object per target: nvvm/Sm90Lowering.cpp,
// rocdl/Gfx950Lowering.cpp) and TargetProgram (one kernel's target state, emitting and patterns,
// made by its TargetLowering for each GpuKernelState). The common patterns (GpuPatterns.h) ask them
// instead of testing which target it is. Internal to lowering/ (they speak MLIR).
#pragma once

#include <memory>
#include <vector>

#include "core/Status.h"
#include "lowering/Spread.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "tile/TileDialect.h"


namespace mlir {
class RewritePatternSet;
class TypeConverter;
} // namespace mlir

namespace m3idx::lowering {

class GpuKernelState;
class TargetProgram;

// Which unit runs a dot.tiles: FFMA (every target), mma.sync or wgmma (sm_90), MFMA (gfx950).
enum class DotUnit { Ffma, MmaSync, Wgmma, Mfma };
const char *dotUnitName(DotUnit u); // "ffma", "mma.sync", "wgmma", "mfma"

// A target's facts that hold for every kernel, and the factory of its per-kernel programs.
class TargetLowering {
public:
  virtual ~TargetLowering() = default;
  virtual const char *name() const = 0;
  // The target's side of one kernel's conversion, made once per GpuKernelState (it holds that
  // kernel's target state: tables, fragments, plans) and living as long as it.
  virtual std::unique_ptr<TargetProgram> program(GpuKernelState &kernel) const = 0;

  // GPU form. The target's layout pass: every tile of the tile kernel `fn` (a program of
  // `threads` threads) gets its layout as its type's encoding, with a convert_layout where a use
  // needs another (the conversion's patterns dispatch on them). By default every tile is
  // blocked; sm_90 keeps keys and dot results in mma / wgmma fragment orders (nvvm/Sm90Layouts.h).
  virtual mlir::LogicalResult assignLayouts(mlir::func::FuncOp fn, int threads) const;
  // GPU form. Threads of a `threads`-thread program that exchange values by shuffles (a warp, or
  // the whole wave).
  virtual int shuffleWidth(int threads) const { return threads; }
  // A barrier ordering the program's workgroup-memory accesses.
  virtual void barrier(mlir::ImplicitLocOpBuilder &b, int threads) const;
  // The LLVM sync scope of one device's programs, for atomic.add's fences ("": the system).
  virtual const char *deviceSyncScope() const { return ""; }
  // A program the target cannot run (kernel `name` of `warps` warps) is an error naming why.
  virtual Status checkProgram(llvm::StringRef /*name*/, int64_t /*warps*/) const { return Status(); }
  // sm_90: the key tables in constant and shared memory its decodes and f32 keys read.
  virtual bool keyTables() const { return false; }
};

// One kernel's target-specific emitting (TargetLowering::program): the common patterns ask it
// where a target picks the form of an op, instead of testing which target it is; ops on tiles in
// the target's own layouts are its own patterns (addPatterns).
class TargetProgram {
public:
  virtual ~TargetProgram() = default;

  virtual DotUnit dotUnit(tile::DotTilesOp) const { return DotUnit::Ffma; }
  // A dot this target must not run on the unit it got is an error naming its shapes. A dot on a
  // matrix unit (unit != Ffma) is the target's own pattern (addPatterns).
  virtual Status checkDot(tile::DotTilesOp, DotUnit) const { return Status(); }
  // The matrix unit's B operand of a staged dot_tiles b (byte tiles of `rows` rows in `staged`).
  virtual void stageMatrixB(mlir::Value /*b*/, mlir::Value /*staged*/, int64_t /*rows*/) {}
  // decode of NVFP4 (SPEC §2) for a thread's packed bytes and their scales.
  virtual mlir::Value decodeNvfp4(mlir::Value packed, mlir::Value scales) = 0;
  // GPU forms: before a dot operand is staged where it is defined (its loads and the ones before
  // it issued, the staging's stores about to wait for them): work that needs no loaded value.
  virtual void beforeStaging() {}
  // Attributes of the kernel function (a register budget) once the program is planned; its loops
  // carry at most `keyTilesInFlight` packed key tiles.
  virtual void annotate(mlir::gpu::GPUFuncOp, int64_t /*keyTilesInFlight*/) {}

  // GPU forms: tile `v` (of `lanes` lanes) from layout `from` to `to` through `buffer` (a workgroup
  // buffer of its lanes), for a convert_layout of the layout pass ({}: the target has none).
  virtual mlir::Value convertLayout(int64_t /*lanes*/, mlir::Value /*v*/, Spread /*from*/, Spread /*to*/,
                                    mlir::Value /*buffer*/) {
    return {};
  }
  // GPU forms, the target's own layouts: the per-thread type of a tile in each layout other than
  // blocked, as conversions of the kernel's GpuTypeConverter (GpuTypes.h; none by default). They
  // may follow the program's planned dots: the conversion asks for types once planning is done
  // (the converter caches each answer).
  virtual void addTypeConversions(mlir::TypeConverter &) {}
  // extf of a decode's keys through the target's own table of key values ({}: the common widening).
  virtual mlir::Value keysF32(tile::DecodeNvfp4Op) { return {}; }
  // Stages dot operand b's value `val` into its buffer in the target's own layout (true), or
  // leaves it to the common copy (false).
  virtual bool stageOwnLayout(mlir::Value /*b*/, mlir::Value /*buf*/, mlir::Value /*val*/) { return false; }
  // Workgroup planning of a dot.tiles on its unit (its b operand of `bLanes` lanes): b's staging
  // buffer (`elements` bytes, else f32s, aligned to `align` bytes where not 0) and whether the
  // result stays in the unit's registers (else a workgroup buffer takes it); an error for a dot
  // the program cannot run so.
  struct DotStaging {
    int64_t elements = 0;
    bool bytes = false;
    int64_t align = 0;
    bool resultInRegisters = false;
  };
  virtual StatusOr<DotStaging> planDot(tile::DotTilesOp op, DotUnit unit, int64_t bLanes);
  // f32s of workgroup memory the program's dots exchange partial results through (0: none),
  // once every dot is planned.
  virtual int64_t exchangeFloats() const { return 0; }
  // Declarations in the GPU module before the kernel (`keysAsF32`: some decode is widened to f32,
  // which a target with key tables looks up in one).
  virtual void declareGlobals(mlir::Block * /*moduleBody*/, bool /*keysAsF32*/) {}
  // At the program's start: its exchange buffer ({} without one) and the workgroup buffer of the
  // key table its decodes read ({} without one).
  virtual void bind(mlir::Value /*exchange*/, bool /*keysAsF32*/, mlir::Value /*keyWords*/) {}
  // Trips per iteration a loop runs with (`hint`, its m3idx.unroll, where the target gains from
  // it, else 1).
  virtual int64_t loopUnroll(int64_t /*hint*/) const { return 1; }

  // The patterns of ops on tiles in the target's own layouts, of a higher benefit than the common
  // ones (none by default).
  virtual void addPatterns(const mlir::TypeConverter &, mlir::RewritePatternSet &) {}
  // grid_await (`await`) and grid_release (dsl/Builder.h): nothing on a target that starts no
  // kernel's programs before the kernel ahead of it has ended.
  virtual void orderGrids(bool /*await*/) {}
};

const TargetLowering &sm90Lowering();
const TargetLowering &gfx950Lowering();

} // namespace m3idx::lowering
