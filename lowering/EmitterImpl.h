// The DSL -> MLIR emitter's class: MlirEmitter.cpp (ops common to every target, and the host
// module), GpuEmitter.cpp (how tiles are spread over a GPU program's threads, and the GPU module),
// and sm_90's emitting code (nvvm/Sm90*.cpp, driven by its Sm90Program). The host's and gfx950's
// programs (TargetLowering.h: host/HostProgram.h, rocdl/Gfx950Program.h) hold their own state and
// code and emit with the building blocks declared public here. The common files never test which
// target they emit for: they ask target_ and program_. Internal to lowering/.
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
        gpu_(target.distributed()), threads_(threads * k.warps), program_(target.program(*this)) {}

  const dsl::Kernel &kernel() const { return k_; }

  StatusOr<OwningOpRef<ModuleOp>> run();
  StatusOr<OwningOpRef<ModuleOp>> runGpu();
  // The kernel's text with each value's spread over the program's threads and each dot.tiles'
  // unit, as the GPU form assigns them (GpuStage::Layouts).
  std::string layouts();

private:
  // The GPU program's workgroup memory, planned from the kernel before anything is emitted.
  struct WorkgroupPlan {
    enum class Role { StageB, Result, WgmmaExchange };
    struct Buffer {
      Role role;
      int32_t key; // b operand id, or op index
      mlir::Type type;
      int64_t align = 0; // bytes, where more than the element's is needed
    };
    std::map<int, int64_t> shuffleLanes; // per element type: a general shuffle's buffer
    std::vector<Buffer> dotBuffers;      // dot.tiles staging, results, wgmma exchanges
    int64_t mmaColumns = 0;              // the most columns an mma dot spans (in tiles of 8)
    bool keysAsF32 = false;              // some extf or FFMA dot.tiles takes a decode's keys as f32
    bool keyWords = false;               // decodes read the target's key table in shared memory
    int64_t keyTilesInFlight = 0;        // the most packed key tiles one loop carries (loads ahead)
  };
  Status planProgram(); // each value's defining op and spread, the target's program checks
  StatusOr<WorkgroupPlan> planWorkgroupMemory();
  mlir::MemRefType workgroupBuffer(int64_t n, mlir::Type e);
  mlir::gpu::GPUFuncOp declareKernel(const WorkgroupPlan &plan);
  void bindProgram(mlir::gpu::GPUFuncOp fn, const WorkgroupPlan &plan); // arguments, buffers, tables
  // sm_90's state and emitting code are still the Emitter's (nvvm/Sm90*.cpp); its program drives them.
  friend class Sm90Program;

public:
  // The building blocks of every form's emitting, which the targets' programs (TargetProgram, in
  // host/, nvvm/ and rocdl/) emit with too.
  ImplicitLocOpBuilder &builder() { return b_; }
  int threads() const { return threads_; }
  std::vector<mlir::Value> &values() { return values_; } // per ValueId: the emitted value
  // dot.tiles b operand id -> its staged copy (GPU: workgroup memory; host: widened rows)
  std::map<int32_t, mlir::Value> &stagedDotOperands() { return dotStage_; }
  TargetProgram &program() { return *program_; }
  mlir::Value bufferArg(int64_t i) const { return buffers_[i]; } // the kernel's buffer argument i
  // While a target emits an op piece by piece (the host's wide tiles), tiles of `lanes` lanes
  // are typed as vectors of `piece` lanes (type()); {} outside.
  struct PieceView {
    int64_t lanes = 0, piece = 0;
  };
  void setPieceView(PieceView v) { piece_ = v; }
  // Keeps the first lowering error, naming the kernel line of the op being emitted.
  void fail(const std::string &what);
  // " (at kernels_src/File.cpp:LINE)" for an op the DSL knows the source of, else "".
  static std::string sourceOf(const dsl::Op &op);
  mlir::Location locOf(const dsl::Op &op);
  mlir::Type elemType(Elem e);
  mlir::Type type(dsl::Type t);
  // A value's per-thread type: on GPUs it depends on the value's spread (sm_90 fragment orders).
  mlir::Type valueType(dsl::ValueId v);
  Spread spreadOf(dsl::ValueId v) const { return spread_.empty() ? Spread::Blocked : spread_[v.id]; }
  mlir::Value mmaRowsLoadTile(mlir::Value buf, mlir::Value off, int64_t lanes, mlir::Type elem,
                              int64_t alignBytes);
  // In programs with one mma column tile, MmaRows byte tiles of at most 8 bytes per row (NVFP4
  // scales) hold each byte zero-extended in an i32 (a vector<lanes / 32 x i32>): every scale is a
  // table index, and bytes packed in a word cost one byte extraction (PRMT, on the ALU pipe the
  // score loop is bound by) per use. Measured on the H200 (bench/RESULTS.md): one column tile,
  // score 1.4% faster; two column tiles (104 registers), H=4 decode 3.7% and prefill 2% slower.
  bool mmaRowsWidened(int64_t lanes, unsigned elemBits) const {
    return mmaColumnTiles() == 1 && elemBits == 8 && lanes <= 16 * 8;
  }
  mlir::Value mmaAccIota(int64_t lanes);
  mlir::Value mmaAccReduceMaxGroups(mlir::Value acc, int64_t groups);
  // GPU distribution of a tile of `lanes` lanes over threads_ threads.
  int64_t chunk(int64_t lanes) const { return lanes >= threads_ ? lanes / threads_ : 1; }
  bool partial(int64_t lanes) const { return lanes < threads_; }
  mlir::Value laneI64();
  mlir::Value warpLaneI64(); // the thread's lane in its warp of shuffleWidth threads
  mlir::Value laneBelow(int64_t n); // i1: this thread holds a lane of an n-lane tile
  mlir::Value shuffleIdx(mlir::Value v, mlir::Value srcLane); // any int/float scalar
  mlir::Value shuffleXor(mlir::Value v, int32_t mask);
  void barrier(); // orders the program's workgroup-memory accesses
  // dsl atomic.add: buf[at] += v for the whole program, between a release and an acquire fence
  // of the device's scope; returns the old value (uniform).
  mlir::Value atomicAdd(mlir::Value buf, mlir::Value at, mlir::Value v);
  mlir::Value warpReduce(mlir::Value perThread, int64_t lanes, bool add, bool isFloat);
  mlir::Value gpuExtract(mlir::Value t, int64_t tileLanes, int64_t lane);
  // splat[i]: operand i is a DSL splat (every lane the same value)
  mlir::Value gpuShuffle(mlir::Value a, mlir::Value b, int64_t lanes, ArrayRef<int32_t> mask,
                         dsl::Elem elem, std::array<bool, 2> splat);
  mlir::Value lanePermutation(mlir::Value a, mlir::Value b, int64_t lanes, ArrayRef<int32_t> mask,
                              std::array<bool, 2> splat);
  bool madeBySplat(dsl::ValueId v) const;
  mlir::Value gpuLoadTile(mlir::Value buf, mlir::Value off, int64_t lanes, mlir::Type elem,
                          int64_t alignBytes = 0);
  void gpuStoreTile(mlir::Value buf, mlir::Value off, mlir::Value v, int64_t lanes);
  void gpuStoreScatter(mlir::Value buf, mlir::Value offsets, mlir::Value v, mlir::Value mask,
                       int64_t lanes);
  mlir::Value smemFor(dsl::Elem e);
  mlir::Value maxNum(mlir::Value a, mlir::Value b);
  mlir::Value gpuExtractDynamic(mlir::Value t, int64_t tileLanes, mlir::Value lane);
  // GPU: extf(nvfp4.decode(p, s)) as one lookup per element in a table of the 16 x 256 exact key
  // values (core/Nvfp4), instead of the decode's arithmetic and the widening's.
  mlir::Value gpuKeysF32(const dsl::Op &decode);
  // The scale bytes of this thread's `perThread` consecutive decoded elements, one per 16 (a
  // vector<max(1, perThread / 16) x i8>).
  mlir::Value gpuThreadScales(mlir::Value scales, int64_t perThread);
  mlir::Value gpuDotTiles(const dsl::Op &op);
  void stageDotOperand(dsl::ValueId v, bool barrierBefore);
  mlir::Value gpuReduceMaxGroups(mlir::Value t, int64_t lanes, int64_t groups);
  mlir::Value loadTileMasked(mlir::Value buf, mlir::Value off, mlir::Value limit, int64_t lanes,
                             mlir::Type elem);
  mlir::Value toF32(mlir::Value v);
  // sm_90 (nvvm/Sm90Emitter.cpp): the decode's rounding as cvt.rn.satfinite.e4m3x2.f16x2, and
  // dot.tiles as f16 mma.sync m16n8k16 (tensor cores) on keys held in fragment order.
  mlir::Value sm90DecodeNvfp4(mlir::Value packed, mlir::Value scales);
  // The .maxnreg of an sm_90 program whose mma.sync dots span `columns` columns (in tiles of 8)
  // and whose score loop carries `keyTilesInFlight` packed key tiles (0: no mma, no cap).
  static int32_t sm90RegisterCap(int64_t columns, int64_t keyTilesInFlight);
  int64_t mmaColumnTiles() const { return (sm90_.mmaColumns + 7) / 8; } // the most mma column tiles of 8
  // Trips per iteration of a dsl for: its unroll hint in programs whose mma B fragments stay in
  // registers (one column tile) or two where they are in shared memory, else 1.
  int64_t sm90LoopUnroll(const dsl::Op &forOp) const;
  void sm90FillKeyWords(); // sm90_.keyWords[2s], [2s + 1]: key bytes of codes 0-3, 4-7 times scale s
  // Fills the key table here unless a fill emitted earlier dominates this point.
  void sm90KeyWordsReady();
  std::pair<mlir::Value, mlir::Value> sm90KeyWordsOf(mlir::Value scaleByte);
  bool mmaFits(const dsl::Op &dotTiles) const; // the shapes mma.sync takes
  bool mmaRuns(const dsl::Op &dotTiles) const; // ... and its keys are in MmaRows order
  mlir::Value mmaDotTiles(const dsl::Op &op);
  // This lane's B registers of column tiles [first, last) (all of them by default).
  mlir::Value mmaFragmentsB(mlir::Value stagedBytes, int64_t rows, int64_t first = 0, int64_t last = -1);
  // Programs whose dots span more than kMmaBRegisterTiles column tiles keep their B fragments in
  // shared memory (in the staging buffer, 2 KB per tile) and load one tile's per use: 32-column
  // decode programs ran at 0.91 ms from shared memory, 24-column ones at 0.30 ms from registers
  // where 0.48 from shared (64 x 128K, H=4; bench/RESULTS.md).
  static constexpr int64_t kMmaBRegisterTiles = 4;
  // Whether an mma b operand of `rows` rows keeps its fragments in shared memory: decides both
  // the staging buffer's size (mmaStageBytes) and where stageDotOperand puts them.
  static bool mmaBInShared(int64_t rows) { return (rows + 7) / 8 > kMmaBRegisterTiles; }
  static int64_t mmaStageBytes(int64_t bLanes); // the staging buffer of an mma b operand
  void mmaFragmentsToShared(mlir::Value stagedBytes, int64_t rows);
  mlir::Value mmaSharedFragments(mlir::Value buf, int64_t tile); // 16 i32: one tile's B registers
  std::pair<mlir::Value, mlir::Value> f16Pairs(mlir::Value e4m3Word);
  // The A registers of MmaRows keys (vector<64 x f8E4M3FN> per thread), per f16 K step.
  std::vector<std::array<mlir::Value, 4>> mmaFragmentsA(mlir::Value keys);
  // sm_90a warpgroup programs (nvvm/Sm90Wgmma.cpp): dot.tiles of 64 MmaRows key tokens (16 per
  // warp, A in registers) against N query columns, N a multiple of 8 up to 128 (B, f16 in shared
  // memory, 128-byte swizzled) as wgmma m64nNk16 with f32 sums.
  static constexpr int64_t kWgmmaTokens = 64; // wgmma's M
  // Warpgroup dots of at most 16 columns (decode requests of few rows x heads) run as mma.sync,
  // each warp on its own 16 of the 64 tokens with B in registers, into the same WgmmaAcc
  // registers (m16n8's C is one warp's share of m64nN's D); wider ones as wgmma.
  static bool warpMmaTakes(int64_t columns) { return columns <= 16; }
  // The .maxnreg of wgmma programs of `columns` columns: 64 -> 128 (4 programs per SM), 128 -> 168
  // (3 per SM; the accumulators alone take 64). Measured on the H200, prefill 4 x 32K H=1 score
  // (bench/RESULTS.md): 64 columns, uncapped (243 registers, 2 programs per SM)
  // 2.46 ms, 168 2.15, 128 2.06; 128 columns with folded token pairs, 128 (1 KB
  // spilled) 1.81 ms, 168 1.35 (no spill in the loop over whole blocks), 200 1.45, 255 1.45.
  // Up to 32 columns (warpgroup decode programs): 96, the fewest ptxas spills nothing under for
  // 32 columns (88 spills 20 bytes), 5 programs per SM where 128 gives 4; each key tile in flight
  // past the first takes 8 more (a second: 100 used, 12 bytes spilled under 96).
  static int32_t wgmmaRegisterCap(int64_t columns, int64_t keyTilesInFlight) {
    if (columns > 32)
      return columns > 64 ? 168 : 128;
    return 96 + 8 * static_cast<int32_t>(std::max<int64_t>(0, keyTilesInFlight - 1));
  }
  bool wgmmaFits(const dsl::Op &dotTiles) const; // the shapes it takes
  bool wgmmaRuns(const dsl::Op &dotTiles) const; // ... and its keys are in MmaRows order
  mlir::Value wgmmaDotTiles(const dsl::Op &op);
  void wgmmaStageColumns(mlir::Value bBuf, mlir::Value queries, int64_t lanes);
  mlir::Value wgmmaDescriptor(mlir::Value buf, int64_t step);
  mlir::Value wgmmaAccIota(int64_t lanes);
  mlir::Value wgmmaAccReduceMaxGroups(mlir::Value acc, int64_t groups, bool folded);
  mlir::Value wgmmaAccFoldMax(mlir::Value acc, int64_t pairs, Spread result);
  mlir::Value wgmmaAccFoldThreadTokens(mlir::Value acc);
  void declareKeyTable(mlir::Block *moduleBody);
  mlir::Value constant(mlir::Type t, double v);
  mlir::Value toIndex(mlir::Value v);
  mlir::Value get(dsl::ValueId v) { return values_[v.id]; }
  // A for / if block made by scf's builders, emptied of its implicit yield, as the insertion point.
  void openRegionBlock(mlir::Block *block);
  void emitRegion(const dsl::Region &r);
  void emitOp(const dsl::Op &op);
  void emitOpAt(const dsl::Op &op); // emitOp with the op's location on every MLIR op it makes
  mlir::Value emitDecodeNvfp4(mlir::Value packed, mlir::Value scales);
  mlir::Value emitPackScoreKey(mlir::Value score, mlir::Value block);

private:
  const dsl::Kernel &k_;
  ImplicitLocOpBuilder b_;
  std::vector<mlir::Value> values_;
  std::vector<mlir::Value> buffers_, scalars_;
  mlir::Value programId_;
  const TargetLowering &target_;
  bool gpu_ = false;                          // the distributed (GPU) form
  int threads_ = 32;                          // gpu: threads of a program
  std::map<int32_t, mlir::Value> dotStage_;   // gpu: b operand id -> staged copy (f32 or bytes)
  std::map<int32_t, mlir::Value> dotResult_;  // gpu: dot.tiles op index -> result buffer
  std::map<int32_t, mlir::Value> mfmaB_;      // b operand id -> this lane's B fragment(s)
  std::vector<Spread> spread_;                // sm_90: per ValueId (empty: all Blocked)
  size_t stageCount_ = 0;
  std::vector<int32_t> dotStageOf_;           // ValueId -> index into stageBufs_, or -1
  std::vector<mlir::Value> stageBufs_;
  mlir::Value lane_;                          // gpu: thread id (index)
  std::map<int, mlir::Value> smem_;           // gpu: workgroup buffer per element type
  std::string error_;                         // first lowering error
  std::vector<int32_t> definingOp_;           // ValueId -> index of the op that makes it
  int64_t scaleLanes_ = 0;
  std::unique_ptr<TargetProgram> program_;    // made last, from the emitter it serves
  // sm_90 programs' own state (nvvm/): where their tables, B fragments and wgmma exchanges live.
  struct Sm90State {
    mlir::Value keyTable;                      // constant memory: the 16 x 256 exact f32 keys
    mlir::Value keyWords;                      // workgroup memref<512xi32>, see sm90FillKeyWords
    mlir::Block *keyWordsFilledIn = nullptr;   // the block whose fill of keyWords is emitted (none yet)
    std::map<int32_t, mlir::Value> mmaBShared; // b operand id -> its B fragments in shared memory
    int64_t mmaColumns = 0;                    // the most columns an mma dot spans
    int64_t keyTilesInFlight = 0;              // WorkgroupPlan's
    std::set<int32_t> wgmmaB;                  // b operand ids staged as wgmma B
    int64_t wgmmaColumns = 0;    // N of the program's warpgroup dots (one N per program; wgmma or mma.sync)
    mlir::Value wgmmaExchange;   // the warps' column maxima (two of 4 x N floats, used in turn)
    mlir::Value wgmmaExchangeAt; // the offset of the one the next reduction uses (0 or 4 N)
  } sm90_;
  const dsl::Op *currentOp_ = nullptr;        // the op being emitted
  PieceView piece_;
};

} // namespace m3idx::lowering
