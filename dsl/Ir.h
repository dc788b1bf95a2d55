// The DSL's in-memory program: a kernel is buffer and scalar arguments plus a body of SSA ops,
// with structured regions (for, if) and no target detail. Lowerings walk it; the printer gives the
// canonical text used by `m3idx inspect --emit dsl` and by the cache key.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dsl/Types.h"

namespace m3idx::dsl {

enum class OpKind : uint8_t {
  // leaves
  ConstInt, ConstFloat, ScalarArg, ProgramId, Iota,
  // elementwise (scalar or tile; both operands of one type)
  Add, Sub, Mul, DivS, RemS, MinS, MaxS, MaxNumF, And, Or, Xor, Shl, ShrU,
  CmpEq, CmpNe, CmpLtS, CmpLeS, CmpGtS, CmpGeS, CmpGtU, CmpUnordF, CmpEqF,
  Select,
  // conversions
  ExtS, ExtU, Trunc, SIToFP, ExtF, TruncF, Bitcast, ClampF,
  // tiles
  Splat, Extract, ExtractAt, Shuffle, ReduceAdd, ReduceMax, ReduceMaxGroups, FoldMax,
  // memory (buffers are 1-D; offsets are i64 element indices)
  Load, LoadTile, LoadTileMasked, LoadGather, LoadRows, Store, StoreTile, StoreScatter,
  AtomicAdd, // scalar: the old value; ordered after the program's stores, before its loads
  // the order of a step's kernels (KernelBuilder::awaitEarlierGrids, releaseNextGrid)
  GridAwait, GridRelease,
  // every store of the program before it is seen by every load of the program after it
  ProgramSync,
  // domain ops
  DecodeNvfp4, Dot, DotTiles, PackScoreKey,
  // structure (Stage: KernelBuilder::stagedFor's hand-over from its producer to its consumer)
  For, If, Yield, Stage,
};

const char *opName(OpKind k);

struct ValueId {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
};

struct Region {
  std::vector<ValueId> args;  // block arguments (for: iv then iter args)
  std::vector<int32_t> ops;   // indexes into Kernel::ops
};

// Where kernel source built an op: the builder call's file, line and column. Lowering errors name
// it and MLIR carries it as a FileLineColLoc; it is not part of the printed program (the cache
// key), since moving a kernel line changes no code.
struct Loc {
  const char *file = nullptr; // a string literal of the build (std::source_location's)
  uint32_t line = 0, column = 0;
  bool known() const { return file != nullptr; }
};

struct Op {
  OpKind kind;
  Loc loc;
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  int64_t intAttr = 0;            // constants, lane index, buffer index, arg index, for: unroll hint,
                                  // stage: its stages
  double floatAttr = 0;
  std::vector<int32_t> lanesAttr; // shuffle mask
  int32_t alignAttr = 0;          // load.tile(.masked), store.tile: bytes the offset's address is known aligned to
  std::vector<Region> regions;    // for: body; if: then, else
};

// ReadWrite: a buffer the kernel both reads and writes (its own stores, or other programs' ones
// published through atomicAdd), and the only access atomics take.
enum class Access : uint8_t { Read, Write, ReadWrite };

struct BufferArg {
  std::string name;
  Elem elem;
  Access access;
};

struct ScalarArgDecl {
  std::string name;
  Elem elem;
};

struct Kernel {
  std::string name;
  // Warps a GPU program runs on (Triton's num_warps): how the lowering spreads tiles, and the
  // launch's threads per program. Targets without multi-warp programs reject more than 1.
  int warps = 1;
  std::vector<BufferArg> buffers;
  std::vector<ScalarArgDecl> scalars;
  std::vector<Type> valueTypes; // by ValueId
  std::vector<Op> ops;
  Region body;

  Type typeOf(ValueId v) const { return valueTypes[v.id]; }
  bool has(OpKind kind) const {
    for (const Op &op : ops)
      if (op.kind == kind)
        return true;
    return false;
  }
  // Canonical text: stable across runs and builds, so it can key a cache.
  std::string print() const;
  // The same with `note(op)`, where not empty, after each op's line as "  // note" (a lowering's
  // layouts; never part of a key).
  std::string print(const std::function<std::string(const Op &)> &note) const;
};

} // namespace m3idx::dsl
