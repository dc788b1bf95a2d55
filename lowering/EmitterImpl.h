// The GPU targets' DSL -> MLIR emitter: MlirEmitter.cpp (each op's GPU form) and GpuEmitter.cpp
// (the GPU module: layouts, workgroup memory, the kernel function, dots on FFMA), emitting with
// GpuThreads.h (a tile spread over a program's threads). Each target's per-kernel state and code
// is its TargetProgram (TargetLowering.h: nvvm/Sm90Program.h, rocdl/Gfx950Program.h), which emits
// with the building blocks declared public here. The common files never test which target they
// emit for: they ask target_ and program_. The host is not emitted here: its form is conversion
// patterns over the tile dialect (host/HostPatterns.h), as every target's is to become (issue 37).
// Internal to lowering/.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"
#include "lowering/Build.h"
#include "lowering/GpuThreads.h"
#include "lowering/GpuTypes.h"
#include "lowering/MlirEmitter.h"
#include "lowering/TargetLowering.h"
#include "lowering/Spread.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OwningOpRef.h"

namespace m3idx::lowering {

using dsl::Elem;
using dsl::OpKind;
using mlir::ArrayRef;
using mlir::ModuleOp;
using mlir::OwningOpRef;
using mlir::ImplicitLocOpBuilder;
using mlir::MLIRContext;

// Workgroup memory the dot.tiles buffers of one program may take (of the 48 KiB both targets give
// a kernel without opting in to more; the sm_90 key table takes 2 KiB).
inline constexpr int64_t kMaxDotWorkgroupBytes = 40 * 1024;

class Emitter {
public:
  // `threads`: a GPU program's threads per warp (a kernel's warps multiply it).
  Emitter(mlir::MLIRContext &ctx, const dsl::Kernel &k, const TargetLowering &target, int threads = 1)
      : k_(k), b_(mlir::UnknownLoc::get(&ctx), &ctx), values_(k.valueTypes.size()), target_(target),
        gpu_(b_, target, threads * k.warps, [this](const std::string &what) { fail(what); }),
        threads_(threads * k.warps), types_(threads_), program_(target.program(*this)) {
    program_->addTypeConversions(types_);
  }

  const dsl::Kernel &kernel() const { return k_; }

  StatusOr<OwningOpRef<ModuleOp>> runGpu();
  // The kernel as the tile dialect with each tile's layout as its type's encoding and each
  // dot_tiles' unit (`m3idx.unit`), as the GPU form assigns them (GpuStage::Layouts).
  StatusOr<std::string> layouts();

private:
  // The GPU program's workgroup memory, planned from the kernel before anything is emitted.
  struct WorkgroupPlan {
    enum class Role { StageB, Result, Exchange, Convert };
    struct Buffer {
      Role role;
      int32_t key; // b operand id, op index, or (Convert) the converted value's id
      mlir::Type type;
      int64_t align = 0; // bytes, where more than the element's is needed
    };
    std::map<int, int64_t> shuffleLanes; // per element type: a general shuffle's buffer
    std::vector<Buffer> dotBuffers;      // dot.tiles staging, results, the target's exchange
    bool keysAsF32 = false;              // some extf or FFMA dot.tiles takes a decode's keys as f32
    bool keyWords = false;               // decodes read the target's key table in shared memory
    int64_t keyTilesInFlight = 0;        // the most packed key tiles one loop carries (loads ahead)
  };
  Status planProgram(); // each value's defining op and spread, the target's program checks
  StatusOr<WorkgroupPlan> planWorkgroupMemory();
  mlir::MemRefType workgroupBuffer(int64_t n, mlir::Type e);
  mlir::gpu::GPUFuncOp declareKernel(const WorkgroupPlan &plan);
  void bindProgram(mlir::gpu::GPUFuncOp fn, const WorkgroupPlan &plan); // arguments, buffers, tables

public:
  // The building blocks of every form's emitting, which the targets' programs (TargetProgram, in
  // nvvm/ and rocdl/) emit with too.
  ImplicitLocOpBuilder &builder() { return b_; }
  int threads() const { return threads_; }
  GpuThreads &gpu() { return gpu_; } // GPU forms: lanes, shuffles, barriers, blocked loads and stores
  int64_t decodeScaleLanes() const { return scaleLanes_; } // the scales of the decode being emitted
  std::vector<mlir::Value> &values() { return values_; } // per ValueId: the emitted value
  // dot.tiles b operand id -> its staged copy in workgroup memory
  std::map<int32_t, mlir::Value> &stagedDotOperands() { return dotStage_; }
  TargetProgram &program() { return *program_; }
  mlir::Value bufferArg(int64_t i) const { return buffers_[i]; } // the kernel's buffer argument i
  // Keeps the first lowering error, naming the kernel line of the op being emitted.
  void fail(const std::string &what);
  mlir::Type type(dsl::Type t);
  // A value's per-thread type: its tile type with its layout as the encoding, converted by the
  // kernel's GpuTypeConverter (sm_90's fragment orders added by its program).
  mlir::Type valueType(dsl::ValueId v);
  Spread spreadOf(dsl::ValueId v) const { return spread_.empty() ? Spread::Blocked : spread_[v.id]; }
  // dsl atomic.add: buf[at] += v for the whole program, between a release and an acquire fence
  // of the device's scope; returns the old value (uniform).
  mlir::Value atomicAdd(mlir::Value buf, mlir::Value at, mlir::Value v);
  bool madeBySplat(dsl::ValueId v) const;
  mlir::Value maxNum(mlir::Value a, mlir::Value b);
  mlir::Value gpuDotTiles(const dsl::Op &op);
  void stageDotOperand(dsl::ValueId v, bool barrierBefore);
  mlir::Value loadTileMasked(mlir::Value buf, mlir::Value off, mlir::Value limit, int64_t lanes,
                             mlir::Type elem, int64_t alignBytes = 0);
  mlir::Value get(dsl::ValueId v) { return values_[v.id]; }
  // A for / if block made by scf's builders, emptied of its implicit yield, as the insertion point.
  void openRegionBlock(mlir::Block *block);
  void emitRegion(const dsl::Region &r);
  void emitOp(const dsl::Op &op);
  void emitOpAt(const dsl::Op &op); // emitOp with the op's location on every MLIR op it makes

private:
  const dsl::Kernel &k_;
  ImplicitLocOpBuilder b_;
  std::vector<mlir::Value> values_;
  std::vector<mlir::Value> buffers_, scalars_;
  mlir::Value programId_;
  const TargetLowering &target_;
  GpuThreads gpu_;                            // the program's threads
  int threads_ = 32;                          // threads of a program
  GpuTypeConverter types_;                    // tile types (layouts as encodings) -> per-thread types
  std::map<int32_t, mlir::Value> dotStage_;   // b operand id -> staged copy (f32 or bytes)
  std::map<int32_t, mlir::Value> dotResult_;  // FFMA dot.tiles op index -> result buffer
  std::vector<Spread> spread_;                // per ValueId (empty: all Blocked)
  std::map<int32_t, Spread> converts_;        // ValueId -> the layout its uses read it in
  std::map<int32_t, mlir::Value> convertBuf_; // ValueId -> the workgroup buffer of its convert
  size_t stageCount_ = 0;
  std::vector<int32_t> dotStageOf_;           // ValueId -> index into stageBufs_, or -1
  std::vector<mlir::Value> stageBufs_;
  std::string error_;                         // first lowering error
  std::vector<int32_t> definingOp_;           // ValueId -> index of the op that makes it
  int64_t scaleLanes_ = 0;
  std::unique_ptr<TargetProgram> program_;    // made last, from the emitter it serves
  const dsl::Op *currentOp_ = nullptr;        // the op being emitted
};

} // namespace m3idx::lowering
