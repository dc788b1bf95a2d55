// The DSL -> MLIR emitter's class, shared by its two files: MlirEmitter.cpp (ops common to every
// target, and the host module) and GpuEmitter.cpp (how tiles are spread over a GPU program's
// threads, and the GPU module). Internal to lowering/.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"
#include "lowering/MlirEmitter.h"
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

class Emitter {
public:
  Emitter(mlir::MLIRContext &ctx, const dsl::Kernel &k, bool gpu)
      : k_(k), b_(mlir::UnknownLoc::get(&ctx), &ctx), values_(k.valueTypes.size()), gpu_(gpu) {}

  StatusOr<OwningOpRef<ModuleOp>> run();
  StatusOr<OwningOpRef<ModuleOp>> runGpu();

private:
  mlir::Type elemType(Elem e);
  mlir::Type type(dsl::Type t);
  // GPU distribution of a tile of `lanes` lanes over kGpuThreads threads.
  static int64_t chunk(int64_t lanes) { return lanes >= kGpuThreads ? lanes / kGpuThreads : 1; }
  static bool partial(int64_t lanes) { return lanes < kGpuThreads; }
  mlir::Value laneI64();
  mlir::Value laneBelow(int64_t n); // i1: this thread holds a lane of an n-lane tile
  mlir::Value shuffleIdx(mlir::Value v, mlir::Value srcLane); // any int/float scalar
  mlir::Value shuffleXor(mlir::Value v, int32_t mask);
  mlir::Value warpReduce(mlir::Value perThread, int64_t lanes, bool add, bool isFloat);
  mlir::Value gpuExtract(mlir::Value t, int64_t tileLanes, int64_t lane);
  mlir::Value gpuShuffle(mlir::Value a, mlir::Value b, int64_t lanes, ArrayRef<int32_t> mask,
                         dsl::Elem elem);
  mlir::Value gpuLoadTile(mlir::Value buf, mlir::Value off, int64_t lanes, mlir::Type elem);
  void gpuStoreTile(mlir::Value buf, mlir::Value off, mlir::Value v, int64_t lanes);
  mlir::Value smemFor(dsl::Elem e);
  mlir::Value maxNum(mlir::Value a, mlir::Value b);
  mlir::Value gpuExtractDynamic(mlir::Value t, int64_t tileLanes, mlir::Value lane);
  int64_t scaleLanes_ = 0;
  // GPU: extf(nvfp4.decode(p, s)) as one lookup per element in a table of the 16 x 256 exact key
  // values (core/Nvfp4), instead of the decode's arithmetic and the widening's.
  mlir::Value gpuKeysF32(const dsl::Op &decode);
  // The scale byte this thread's `perThread` consecutive decoded elements share.
  mlir::Value gpuThreadScale(mlir::Value scales, int64_t perThread);
  void declareKeyTable(mlir::Block *moduleBody);
  std::vector<int32_t> definingOp_; // ValueId -> index of the op that makes it
  mlir::Value keyTable_;
  mlir::Value constant(mlir::Type t, double v);
  mlir::Value toIndex(mlir::Value v);
  mlir::Value get(dsl::ValueId v) { return values_[v.id]; }
  void emitRegion(const dsl::Region &r);
  void emitOp(const dsl::Op &op);
  mlir::Value emitDecodeNvfp4(mlir::Value packed, mlir::Value scales);
  mlir::Value emitPackScoreKey(mlir::Value score, mlir::Value block);

  const dsl::Kernel &k_;
  ImplicitLocOpBuilder b_;
  std::vector<mlir::Value> values_;
  std::vector<mlir::Value> buffers_, scalars_;
  mlir::Value programId_;
  bool gpu_ = false;
  mlir::Value lane_;                          // gpu: thread id (index)
  std::map<int, mlir::Value> smem_;           // gpu: workgroup buffer per element type
  std::string error_;                         // first lowering error
};

} // namespace m3idx::lowering
