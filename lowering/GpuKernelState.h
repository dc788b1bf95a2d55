// One GPU kernel's state while its tile form is converted to the target's (GpuPatterns.h): the
// program's threads (GpuThreads.h), its types (GpuTypes.h), the target's program (TargetLowering.h:
// nvvm/Sm90Program.h, rocdl/Gfx950Program.h), the workgroup memory planned from the tile form
// before anything is converted, and the building blocks the common patterns and the targets'
// programs emit with. Every pattern first points the state's builder at its op (enter); tile
// values (of the tile form, which the conversion keeps until it ends) key what the state records
// per value. One per converted kernel. Internal to lowering/.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/Status.h"
#include "llvm/ADT/DenseMap.h"
#include "lowering/Build.h"
#include "lowering/GpuThreads.h"
#include "lowering/GpuTypes.h"
#include "lowering/Spread.h"
#include "lowering/TargetLowering.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/DialectConversion.h"
#include "tile/TileDialect.h"

namespace m3idx::lowering {

using mlir::ArrayRef;
using mlir::ImplicitLocOpBuilder;

// Workgroup memory the dot_tiles buffers of one program may take (of the 48 KiB both targets give
// a kernel without opting in to more; the sm_90 key table takes 2 KiB).
inline constexpr int64_t kMaxDotWorkgroupBytes = 40 * 1024;

class GpuKernelState {
public:
  // `fn`: the kernel's tile form, its layouts assigned; `threads`: a program's (a warp's times the
  // kernel's warps).
  GpuKernelState(mlir::func::FuncOp fn, const TargetLowering &target, int threads);
  ~GpuKernelState();

  // Before the conversion: the target's checks of its dots, the workgroup memory.
  Status plan();
  // The planned kernel function in `gpuModule` (the target's globals before it), bound: its entry
  // block starts with the thread id, the target's tables and the program id.
  mlir::gpu::GPUFuncOp declareKernel(mlir::gpu::GPUModuleOp gpuModule);
  mlir::Value programId() const { return programId_; }

  // Each pattern first: the builder at the rewriter's insertion point with `op`'s location, for
  // `op` (errors name its kernel line).
  void enter(mlir::ConversionPatternRewriter &rewriter, mlir::Operation *op);
  // After `op` is converted to `converted` (the builder after them): a result some dot_tiles takes
  // as b is staged here, once.
  void defined(mlir::Operation *op, mlir::ValueRange converted);

  // The building blocks.
  ImplicitLocOpBuilder &builder() { return b_; }
  int threads() const { return threads_; }
  GpuThreads &gpu() { return gpu_; } // lanes, shuffles, barriers, loads and stores, the atomic
  TargetProgram &program() { return *program_; }
  const GpuTypeConverter &types() const { return types_; }
  llvm::StringRef kernelName() const { return name_; }
  const char *targetName() const { return target_.name(); }
  int64_t warps() const { return warps_; }
  // The converted value of a tile-form value (an earlier op's result or a block argument).
  mlir::Value get(mlir::Value tileValue);
  // Keeps the first lowering error, naming the kernel line of the op being converted.
  void fail(const std::string &what);
  const std::string &error() const { return error_; }
  // A tile-form value's per-thread type (an error where its layout has none here).
  mlir::Type valueType(mlir::Value tileValue);
  // The scales of the decode being converted (the target's decodeNvfp4 reads them).
  int64_t decodeScaleLanes() const { return scaleLanes_; }
  void setDecodeScaleLanes(int64_t lanes) { scaleLanes_ = lanes; }
  // dot_tiles b operand (tile form) -> its staged copy in workgroup memory
  llvm::DenseMap<mlir::Value, mlir::Value> &stagedDotOperands() { return dotStage_; }
  // Writes dot_tiles b operand `b` (converted: `value`) into its workgroup buffer.
  void stageDotOperand(mlir::Value b, mlir::Value value, bool barrierBefore);
  // The dot on FFMA (`a`, `b`: its converted operands), the common form; one on a matrix unit is
  // the target's own pattern.
  mlir::Value ffmaDotTiles(tile::DotTilesOp op, mlir::Value a, mlir::Value b);
  mlir::Value maxNum(mlir::Value a, mlir::Value b);
  // convert_layout `op`'s workgroup buffer (of its tile's lanes).
  mlir::Value convertBuffer(mlir::Operation *op) const { return convertBuf_.lookup(op); }

private:
  struct WorkgroupPlan;
  mlir::MemRefType workgroupBuffer(int64_t n, mlir::Type e);

  mlir::func::FuncOp fn_;
  std::string name_;
  int64_t warps_ = 1;
  ImplicitLocOpBuilder b_;
  const TargetLowering &target_;
  GpuThreads gpu_;
  int threads_;
  GpuTypeConverter types_;
  std::unique_ptr<WorkgroupPlan> plan_;
  mlir::ConversionPatternRewriter *rewriter_ = nullptr; // of the pattern running
  mlir::Operation *currentOp_ = nullptr;                // its op
  mlir::Value programId_;
  llvm::DenseMap<mlir::Value, mlir::Value> stageBuf_;        // b operand -> its staging buffer
  llvm::DenseMap<mlir::Value, mlir::Value> dotStage_;        // b operand -> staged (once staged)
  llvm::DenseMap<mlir::Operation *, mlir::Value> dotResult_; // FFMA dot_tiles -> its result buffer
  llvm::DenseMap<mlir::Operation *, mlir::Value> convertBuf_;
  std::string error_;
  int64_t scaleLanes_ = 0;
  std::unique_ptr<TargetProgram> program_; // made last, from the state it serves
};

// The DSL element type of a tile's element type (the key GpuThreads' shuffle scratch is kept by).
dsl::Elem elemOf(mlir::Type t);

} // namespace m3idx::lowering
