// One kernel's sm_90 emitting (TargetProgram), in three parts sharing its Sm90State (key tables,
// B fragments, the warpgroup's exchanges): the NVFP4 decode through per-scale key tables
// (Sm90KeyTables, nvvm/Sm90KeyTables.cpp), tiles in mma fragment order and dot.tiles on mma.sync
// (Sm90Mma, nvvm/Sm90Mma.cpp) and warpgroup dots on wgmma (Sm90Wgmma, nvvm/Sm90Wgmma.cpp); Sm90Program's
// answers to the common patterns' questions are in nvvm/Sm90Lowering.cpp, its own patterns in
// nvvm/Sm90Patterns.cpp. The layouts they emit are assigned by nvvm/Sm90Layouts.cpp. They emit with
// GpuKernelState's building blocks.
// Internal to lowering/.
#pragma once

#include <array>
#include <utility>
#include <vector>

#include "llvm/ADT/DenseSet.h"
#include "lowering/GpuKernelState.h"
#include "lowering/nvvm/WgmmaShape.h"

namespace m3idx::lowering {

// Where one kernel's sm_90 tables, B fragments and wgmma exchanges live: its parts' shared state.
struct Sm90State {
  mlir::Value keyTable;                      // constant memory: the 16 x 256 exact f32 keys
  mlir::Value keyWords;                      // workgroup memref<512xi32>, see Sm90KeyTables::sm90FillKeyWords
  mlir::Block *keyWordsFilledIn = nullptr;   // the block whose fill of keyWords is emitted (none yet)
  llvm::DenseMap<mlir::Value, mlir::Value> mmaBShared; // b operand -> its B fragments in shared memory
  llvm::DenseMap<mlir::Value, mlir::Value> fragmentsB; // b operand -> this lane's B fragments in registers
  int64_t mmaColumns = 0;                              // the most columns an mma dot spans
  llvm::DenseSet<mlir::Value> wgmmaB;                  // b operands staged as wgmma B
  int64_t wgmmaColumns = 0;    // N of the program's warpgroup dots (one N per program; wgmma or mma.sync)
  mlir::Value wgmmaExchange;   // the warps' column maxima (two of 4 x N floats, used in turn)
  mlir::Value wgmmaExchangeAt; // the offset of the one the next reduction uses (0 or 4 N)
};

class Sm90Program;

// What the parts of one kernel's sm_90 emitting share: its kernel state, builder, threads and
// Sm90State; p_ reaches the other parts.
class Sm90Part {
public:
  explicit Sm90Part(Sm90Program &p);

protected:
  Sm90Program &p_;
  GpuKernelState &e_;
  ImplicitLocOpBuilder &b_;
  const int threads_;
  Sm90State &state_;
};

// SPEC §2 through per-scale key tables (nvvm/Sm90KeyTables.cpp): built once per program in shared
// memory (rounded by cvt.rn.satfinite.e4m3x2.f16x2) and looked up with prmt; exact f32 keys in
// constant memory for FFMA dots.
class Sm90KeyTables : Sm90Part {
public:
  using Sm90Part::Sm90Part;
  mlir::Value sm90DecodeNvfp4(mlir::Value packed, mlir::Value scales);
  void sm90FillKeyWords(); // state_.keyWords[2s], [2s + 1]: key bytes of codes 0-3, 4-7 times scale s
  // Fills the key table here unless a fill emitted earlier dominates this point.
  void sm90KeyWordsReady();
  std::pair<mlir::Value, mlir::Value> sm90KeyWordsOf(mlir::Value scaleByte);
  void declareGlobals(mlir::Block *moduleBody, bool keysAsF32);
  mlir::Value keysF32(tile::DecodeNvfp4Op decode);
};

// dot.tiles as f16 mma.sync m16n8k16 (tensor cores) on keys held in fragment order
// (nvvm/Sm90Mma.cpp), and the MmaRows / MmaAcc tiles around it.
class Sm90Mma : Sm90Part {
public:
  using Sm90Part::Sm90Part;
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
  // MmaAcc accumulators of a `lanes`-lane tile, blocked, through `buffer` (of its lanes).
  mlir::Value accToBlocked(mlir::Value acc, int64_t lanes, mlir::Value buffer);
  int64_t mmaColumnTiles() const { return (state_.mmaColumns + 7) / 8; } // the most mma column tiles of 8
  bool mmaFits(tile::DotTilesOp dotTiles) const; // the shapes mma.sync takes
  bool mmaRuns(tile::DotTilesOp dotTiles) const; // ... and its keys are in MmaRows order
  mlir::Value mmaDotTiles(tile::DotTilesOp op);
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
};

class Sm90Wgmma : Sm90Part {
public:
  using Sm90Part::Sm90Part;
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
  bool wgmmaFits(tile::DotTilesOp dotTiles) const; // the shapes it takes
  bool wgmmaRuns(tile::DotTilesOp dotTiles) const; // ... and its keys are in MmaRows order
  mlir::Value wgmmaDotTiles(tile::DotTilesOp op);
  void wgmmaStageColumns(mlir::Value bBuf, mlir::Value queries, int64_t lanes);
  mlir::Value wgmmaDescriptor(mlir::Value buf, int64_t step);
  mlir::Value wgmmaAccIota(int64_t lanes);
  mlir::Value wgmmaAccReduceMaxGroups(mlir::Value acc, int64_t groups, bool folded);
  mlir::Value wgmmaAccFoldThreadTokens(mlir::Value acc);
  mlir::Value wgmmaAccFoldMax(mlir::Value acc, int64_t pairs, Spread result);
};

class Sm90Program final : public TargetProgram {
public:
  explicit Sm90Program(GpuKernelState &e)
      : e_(e), b_(e.builder()), threads_(e.threads()), keys_(*this), mma_(*this), wgmma_(*this) {}

  // TargetProgram (nvvm/Sm90Lowering.cpp)
  DotUnit dotUnit(tile::DotTilesOp op) const override;
  Status checkDot(tile::DotTilesOp op, DotUnit unit) const override;
  void stageMatrixB(mlir::Value b, mlir::Value staged, int64_t rows) override;
  mlir::Value decodeNvfp4(mlir::Value packed, mlir::Value scales) override {
    return keys_.sm90DecodeNvfp4(packed, scales);
  }
  void beforeStaging() override;
  void annotate(mlir::gpu::GPUFuncOp fn, int64_t keyTilesInFlight) override;
  int64_t loopUnroll(int64_t hint) const override;
  void addTypeConversions(mlir::TypeConverter &types) override;
  mlir::Value convertLayout(int64_t lanes, mlir::Value v, Spread from, Spread to, mlir::Value buffer) override;
  // The ops on tiles in sm_90's layouts (nvvm/Sm90Patterns.cpp).
  void addPatterns(const mlir::TypeConverter &types, mlir::RewritePatternSet &patterns) override;
  mlir::Value keysF32(tile::DecodeNvfp4Op decode) override { return keys_.keysF32(decode); }
  bool stageOwnLayout(mlir::Value b, mlir::Value buf, mlir::Value val) override;
  StatusOr<DotStaging> planDot(tile::DotTilesOp op, DotUnit unit, int64_t bLanes) override;
  int64_t exchangeFloats() const override { return 2 * 4 * state_.wgmmaColumns; }
  void declareGlobals(mlir::Block *moduleBody, bool keysAsF32) override {
    keys_.declareGlobals(moduleBody, keysAsF32);
  }
  void bind(mlir::Value exchange, bool keysAsF32, mlir::Value keyWords) override;
  void orderGrids(bool await) override;

  // The .maxnreg of an sm_90 program whose mma.sync dots span `columns` columns (in tiles of 8)
  // and whose score loop carries `keyTilesInFlight` packed key tiles (0: no mma, no cap).
  static int32_t sm90RegisterCap(int64_t columns, int64_t keyTilesInFlight);
  Sm90DotShape dotShape(tile::DotTilesOp dotTiles) const;
  GpuKernelState &kernel() { return e_; }

  // The parts, for each other.
  Sm90KeyTables &keys() { return keys_; }
  Sm90Mma &mma() { return mma_; }
  Sm90Wgmma &wgmma() { return wgmma_; }

private:
  friend class Sm90Part;
  GpuKernelState &e_;
  ImplicitLocOpBuilder &b_;
  const int threads_;
  Sm90State state_;
  Sm90KeyTables keys_;
  Sm90Mma mma_;
  Sm90Wgmma wgmma_;
};

} // namespace m3idx::lowering
