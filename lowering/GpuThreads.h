// A GPU program's threads, as the lowering's building blocks see them: each thread's lane, a tile
// spread blocked over the threads (thread i holds lanes [i * c, i * c + c), or lane i of a tile
// narrower than the program), warp shuffles and barriers, reductions and extracts across lanes,
// blocked loads and stores, and the workgroup scratch general lane permutations go through. They
// take and return per-thread MLIR values (never DSL ops), so the common emitter and every
// target's program emit with them. Internal to lowering/.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <string>

#include "dsl/Types.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace m3idx::lowering {

class TargetLowering;

class GpuThreads {
public:
  // `threads`: the program's (a warp's times its warps); `fail` keeps a lowering error.
  GpuThreads(mlir::ImplicitLocOpBuilder &b, const TargetLowering &target, int threads,
             std::function<void(const std::string &)> fail)
      : b_(b), target_(target), threads_(threads), fail_(std::move(fail)) {}

  // Bound once the kernel function exists: the thread's id (index) and the workgroup buffer of
  // each element type a general shuffle moves (dsl::Elem as int; i1 travels as i8).
  void bind(mlir::Value lane, std::map<int, mlir::Value> scratch) {
    lane_ = lane;
    scratch_ = std::move(scratch);
  }

  int threads() const { return threads_; }
  mlir::Value lane() const { return lane_; }
  mlir::Value laneI64();
  mlir::Value warpLaneI64(); // the thread's lane in its warp of shuffleWidth threads
  mlir::Value laneBelow(int64_t n); // i1: this thread holds a lane of an n-lane tile
  // A tile of `lanes` lanes: its lanes per thread, and whether it is narrower than the program.
  int64_t chunk(int64_t lanes) const { return chunk(lanes, threads_); }
  static int64_t chunk(int64_t lanes, int threads) { return lanes >= threads ? lanes / threads : 1; }
  bool partial(int64_t lanes) const { return lanes < threads_; }

  mlir::Value shuffleIdx(mlir::Value v, mlir::Value srcLane); // any int/float scalar
  mlir::Value shuffleXor(mlir::Value v, int32_t mask);
  void barrier(); // orders the program's workgroup-memory accesses
  // A uniform scalar: the sum or max of a tile's lanes (lanes a partial tile lacks count as the
  // identity).
  mlir::Value warpReduce(mlir::Value perThread, int64_t lanes, bool add, bool isFloat);
  // Lane g of the result: the max of group g of `groups` equal groups of consecutive lanes.
  mlir::Value reduceMaxGroups(mlir::Value t, int64_t lanes, int64_t groups);
  mlir::Value extract(mlir::Value t, int64_t tileLanes, int64_t lane);          // uniform
  mlir::Value extractDynamic(mlir::Value t, int64_t tileLanes, mlir::Value lane); // lane uniform
  // Lane i of the result: lane mask[i] of a ++ b (tiles of `lanes` lanes); splat[i]: operand i
  // has every lane equal.
  mlir::Value shuffle(mlir::Value a, mlir::Value b, int64_t lanes, llvm::ArrayRef<int32_t> mask, dsl::Elem elem,
                      std::array<bool, 2> splat);
  mlir::Value loadTile(mlir::Value buf, mlir::Value off, int64_t lanes, mlir::Type elem, int64_t alignBytes = 0);
  // As loadTile, lanes at or past min(limit, lanes) 0 (no memory touched for them).
  mlir::Value loadTileMasked(mlir::Value buf, mlir::Value off, mlir::Value limit, int64_t lanes, mlir::Type elem,
                             int64_t alignBytes = 0);
  // Lane i: buf[offsets[i]] where mask[i], else 0; each thread its own lanes (none past a narrow
  // tile's).
  mlir::Value loadGather(mlir::Value buf, mlir::Value offsets, mlir::Value mask, int64_t lanes, mlir::Type elem);
  // load.rows where each thread holds one row (its lane of starts and counts) and its `width`
  // lanes: the row as one part of loadTileMasked's form.
  mlir::Value loadRows(mlir::Value buf, mlir::Value starts, mlir::Value counts, int64_t width, mlir::Type elem,
                       int64_t alignBytes);
  void storeTile(mlir::Value buf, mlir::Value off, mlir::Value v, int64_t lanes, int64_t alignBytes = 0);
  void storeScatter(mlir::Value buf, mlir::Value offsets, mlir::Value v, mlir::Value mask, int64_t lanes);
  // buf[at] += v for the whole program, between a release and an acquire fence of the device's
  // scope; returns the old value (uniform).
  mlir::Value atomicAdd(mlir::Value buf, mlir::Value at, mlir::Value v);
  // The scale bytes of this thread's `perThread` consecutive decoded elements, one per 16 (a
  // vector<max(1, perThread / 16) x i8>), from a tile of `scaleLanes` scales.
  mlir::Value threadScales(mlir::Value scales, int64_t scaleLanes, int64_t perThread);

private:
  mlir::Value loadPart(mlir::Value buf, mlir::Value at, mlir::Value count, int64_t c, mlir::Type elem,
                       int64_t alignBytes);
  // A vector shuffle of the thread's own lanes, where every output lane's source is in its own
  // thread's chunk, at the same place in every thread (an xor below the chunk, the first half of
  // each chunk, a thread's one lane to all of its lanes of a wider tile); else null.
  mlir::Value inThreadPermutation(mlir::Value a, mlir::Value b, int64_t lanes, llvm::ArrayRef<int32_t> mask);
  // One warp shuffle per operand and a select, where the mask is a shift or an xor; else null.
  mlir::Value lanePermutation(mlir::Value a, mlir::Value b, int64_t lanes, llvm::ArrayRef<int32_t> mask,
                              std::array<bool, 2> splat);
  mlir::Value maxNum(mlir::Value a, mlir::Value b); // llvm.maxnum: no device-library call

  mlir::ImplicitLocOpBuilder &b_;
  const TargetLowering &target_;
  int threads_;
  std::function<void(const std::string &)> fail_;
  mlir::Value lane_;
  std::map<int, mlir::Value> scratch_;
};

} // namespace m3idx::lowering
