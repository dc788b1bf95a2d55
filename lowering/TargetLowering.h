// What differs between targets in the DSL -> MLIR step, as one interface: host/HostLowering.cpp,
// nvvm/Sm90Lowering.cpp and rocdl/Gfx950Lowering.cpp implement it, and the common emitter
// (MlirEmitter.cpp, GpuEmitter.cpp) asks it instead of testing which target it is. Internal to
// lowering/ (it speaks MLIR); the emitting code a target picks is in its folder's Emitter files.
#pragma once

#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"
#include "lowering/Spread.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"


namespace m3idx::lowering {

class Emitter;

class TargetLowering {
public:
  // Which unit runs a dot.tiles: FFMA (every target), mma.sync or wgmma (sm_90), MFMA (gfx950).
  enum class DotUnit { Ffma, MmaSync, Wgmma, Mfma };
  static const char *dotUnitName(DotUnit u); // "ffma", "mma.sync", "wgmma", "mfma"

  virtual ~TargetLowering() = default;
  virtual const char *name() const = 0;
  // GPU targets spread a tile's lanes over a program's threads; the host keeps whole vectors.
  virtual bool distributed() const = 0;

  // GPU form. Threads of a `threads`-thread program that exchange values by shuffles (a warp, or
  // the whole wave).
  virtual int shuffleWidth(int threads) const { return threads; }
  // A barrier ordering the program's workgroup-memory accesses.
  virtual void barrier(mlir::ImplicitLocOpBuilder &b, int threads) const;
  // The LLVM sync scope of one device's programs, for atomic.add's fences ("": the system, which
  // the host's programs share).
  virtual const char *deviceSyncScope() const { return ""; }
  // A program the target cannot run (its warps) is an error naming why.
  virtual Status checkProgram(const dsl::Kernel &) const { return Status(); }
  // Where each value's lanes live (per ValueId; empty: all Blocked).
  virtual std::vector<Spread> assignSpreads(const Emitter &) const { return {}; }
  virtual DotUnit dotUnit(const Emitter &, const dsl::Op &) const { return DotUnit::Ffma; }
  // A dot this target must not run on the unit it got is an error naming its shapes.
  virtual Status checkDot(const Emitter &, const dsl::Op &, DotUnit) const { return Status(); }
  // The dot on a matrix unit (unit != Ffma).
  virtual mlir::Value matrixDot(Emitter &, const dsl::Op &, DotUnit) const { return {}; }
  // The matrix unit's B operand of a staged dot.tiles b (byte tiles of `rows` rows in `staged`).
  virtual void stageMatrixB(Emitter &, dsl::ValueId, mlir::Value, int64_t) const {}
  // decode of NVFP4 (SPEC §2) for a thread's packed bytes and their scales.
  virtual mlir::Value decodeNvfp4(Emitter &e, mlir::Value packed, mlir::Value scales) const;
  // sm_90: the key tables in constant and shared memory its decodes and f32 keys read.
  virtual bool keyTables() const { return false; }
  // GPU forms: before a dot operand is staged where it is defined (its loads and the ones before
  // it issued, the staging's stores about to wait for them): work that needs no loaded value.
  virtual void beforeStaging(Emitter &) const {}
  // Attributes of the kernel function (a register budget) once the program is planned.
  virtual void annotate(const Emitter &, mlir::gpu::GPUFuncOp) const {}

  // Every form: trips per iteration a dsl for runs with (its unroll hint where the target gains
  // from it, else 1).
  virtual int64_t loopUnroll(const Emitter &, const dsl::Op &) const { return 1; }
};

const TargetLowering &hostLowering();
const TargetLowering &sm90Lowering();
const TargetLowering &gfx950Lowering();

} // namespace m3idx::lowering
