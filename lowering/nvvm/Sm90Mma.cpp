// sm_90's tiles in mma fragment order (Sm90Mma, nvvm/Sm90Program.h; the layouts: Sm90Layouts.h)
// and dot_tiles on the tensor cores as mma.sync on keys in that order; the register budget and
// unroll of programs that run them.
//
// Fragments (PTX ISA, warp-level matrix fragments), g = lane / 4, t = lane % 4. The keys' order is
// that of m16n8k32 8-bit A: registers a0..a3 hold 4 bytes each of rows g, g+8, g, g+8 at K 4t, 4t,
// 4t+16, 4t+16. m16n8k16 f16 (what runs): A a0..a3 are f16 pairs of rows g, g+8, g, g+8 at K 2t,
// 2t, 2t+8, 2t+8; B b0, b1 pairs at K 2t and 2t+8 of column g; C/D c0..c3 are rows g, g, g+8, g+8
// at columns 2t, 2t+1, 2t, 2t+1. The LLVM intrinsic is called by name (llvm.call_intrinsic), as
// for the e4m3 shape MLIR 22's nvvm.mma.sync lacks.
#include <array>
#include <limits>

#include "lowering/nvvm/Sm90Program.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace m3idx::lowering {

using namespace mlir;

namespace {
constexpr int64_t kMmaM = 16, kMmaN = 8, kRowK = 128;
constexpr int64_t kMmaK = 32; // K per step of the keys' word order (two f16 half steps)
// One column tile's B registers: 4 K steps x 2 half steps x (b0, b1), i32 f16 pairs.
constexpr int64_t kMmaBWords = 16;
// sm_90 runs mma.sync e4m3 (m16n8k32) as two f16 HMMA.16816 behind conversions of A and B and
// f32 adds of the partial products (ptxas's emulation: Hopper's fp8 tensor path is wgmma). Doing
// it in the open saves the adds and converts B once per program instead of once per tile: each
// 32-wide K step is two m16n8k16 f16 steps on the e4m3 bytes widened by cvt.rn.f16x2.e4m3x2
// (exact), accumulating in f32.
constexpr const char *kMmaIntrinsic = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32";
} // namespace

// Measured on the H200 (bench/RESULTS.md): with two column tiles ptxas takes 116-128
// registers (16 warps per SM); 104 (19 warps) spills nothing and was faster (prefill 4 x 32K H=1
// score 3.87 vs 4.01 ms). One column tile: the score loop runs 4 tiles per trip (loopUnroll
// below); under 72 or 80 registers ptxas spills 8-16 bytes of it, under 96 none, and uncapped it
// took 66-80 and ran slower (256 x 128K decode score 0.644 ms at 96, 0.692 uncapped; the rolled
// loop needed 72: 0.688). Eight column tiles (prefill, B fragments in shared memory, two tiles
// per trip): uncapped, ptxas takes 254 and that ran fastest (4 x 32K H=1 score 3.05 ms; 3.32 at
// 232 registers, 3.55 at 200, spilling 12-220 bytes). Three and four column tiles in registers
// (24- and 32-column decode programs): the fewest registers ptxas spills nothing under. Each key
// tile carried beyond the first (KernelConfig::tilesAhead) holds 9 more registers a thread: one
// column tile's program still fits 96 with two, two column tiles need 112 (ptxas spills 20 bytes
// under 104). A one-tile program of 5-7 columns (1 head x 6 rows: masked column slots) is the
// tightest at 96: the reverted first try of the 2026-12-03 run split (bench/RESULTS.md) spilled
// 4 bytes there and took 103 registers uncapped, so it gets 104; so does a one-column program (1
// head x 1 row) since the key table's fill moved after the first loads: 4 bytes spilled under 96.
int32_t Sm90Program::sm90RegisterCap(int64_t columns, int64_t keyTilesInFlight) {
  const int64_t columnTiles = (columns + 7) / 8;
  if (columnTiles == 0 || columnTiles > Sm90Mma::kMmaBRegisterTiles)
    return 0;
  const int32_t extra = columnTiles == 1 ? std::max<int32_t>(0, static_cast<int32_t>(keyTilesInFlight) - 2) * 8
                                         : std::max<int32_t>(0, static_cast<int32_t>(keyTilesInFlight) - 1) * 8;
  const int32_t oneTile = columns == 1 || (columns > 4 && columns < 8) ? 104 : 96;
  return std::min<int32_t>(255, (columnTiles == 1 ? oneTile : columnTiles == 2 ? 104 : columnTiles == 3 ? 136 : 168) + extra);
}

// Unroll hints are taken on sm_90 in programs with one mma column tile: the score loop over a
// block's tiles, 4 per trip (next-tile loads at constant offsets, no loop-carried register
// copies), 256 x 128K decode score 0.688 -> 0.644 ms (bench/RESULTS.md). With two
// column tiles H=4 decode was slower unrolled (0.272 -> 0.284-0.289 ms); on the host the 16 x 32K
// decode step was too (16.5 -> 18.4 ms, and its JIT compile 124 -> 196 ms). Programs whose B
// fragments are in shared memory run 2 per trip: LLVM then loads each column tile's fragments
// once for both key tiles, halving the shared-memory loads that bound them (Nsight Compute: MIO
// throttle and short-scoreboard stalls first); prefill 4 x 32K H=1 score 3.30 -> 3.05 ms. gfx950
// is not measured (no AMD GPU here), so it keeps its loops rolled.
int64_t Sm90Program::loopUnroll(int64_t hint) const {
  if (mma_.mmaColumnTiles() > Sm90Mma::kMmaBRegisterTiles)
    return std::min<int64_t>(hint, 2);
  return mma_.mmaColumnTiles() == 1 ? hint : 1;
}

Sm90DotShape Sm90Program::dotShape(tile::DotTilesOp op) const {
  auto a = cast<ShapedType>(op.getLhs().getType()), b = cast<ShapedType>(op.getRhs().getType());
  return {threads_, isa<Float8E4M3FNType>(a.getElementType()), isa<Float8E4M3FNType>(b.getElementType()),
          static_cast<int64_t>(op.getK()), a.getNumElements(), b.getNumElements()};
}

bool Sm90Mma::mmaFits(tile::DotTilesOp op) const { return mmaSyncTakes(p_.dotShape(op)); }

bool Sm90Mma::mmaRuns(tile::DotTilesOp op) const {
  return mmaFits(op) && tile::layoutOf(op.getLhs().getType()) == Spread::MmaRows;
}

namespace {
mlir::Value loadWord(ImplicitLocOpBuilder &b, mlir::Value buf, mlir::Value at) {
  mlir::Value v = vector::LoadOp::create(b, VectorType::get({4}, b.getI8Type()), buf, ValueRange{at},
                                         false, llvm::MaybeAlign(4));
  return vector::ExtractOp::create(
      b, vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), v), ArrayRef<int64_t>{0});
}
} // namespace

// Rows g and g + 8 of a 16-row tile, R / 4 lanes of each at column t R / 4: two vector loads (or,
// for widened byte tiles, one load per byte). In programs of several warps the tile has 16 rows
// per warp, warp w taking rows [16w, 16w + 16).
mlir::Value Sm90Mma::mmaRowsLoadTile(mlir::Value buf, mlir::Value off, int64_t lanes, mlir::Type elem,
                                     int64_t alignBytes) {
  mlir::Type i64 = b_.getI64Type();
  const int64_t R = lanes / (kMmaM * (threads_ / 32)), c = R / 4, bits = elem.getIntOrFloatBitWidth();
  const int64_t partBits = c * bits, partBytes = partBits / 8;
  const int64_t align = alignBytes ? std::min(alignBytes, partBytes & -partBytes) : 0;
  mlir::Value lane = e_.gpu().laneI64();
  // (warp, g) = lane / 4 with rows 16 warp + g: the tile's row of lane / 4 is 16 (lane / 32) + g
  mlir::Value g = arith::DivSIOp::create(b_, lane, constant(b_, i64, 4));
  if (threads_ > 32)
    g = arith::AddIOp::create(b_, g, arith::MulIOp::create(b_, arith::DivSIOp::create(b_, lane, constant(b_, i64, 32)),
                                                           constant(b_, i64, 8)));
  mlir::Value t = arith::RemSIOp::create(b_, lane, constant(b_, i64, 4));
  mlir::Value first = arith::AddIOp::create(
      b_, off, arith::AddIOp::create(b_, arith::MulIOp::create(b_, g, constant(b_, i64, R)),
                                     arith::MulIOp::create(b_, t, constant(b_, i64, c))));
  // An empty asm per loaded 32-bit word (no instruction in the PTX) keeps it a load: loads of the
  // next tile feed a loop-carried value, and LLVM's InstCombine would turn a phi of two small
  // loads into one load of a phi of addresses, issued just before its use (the prefetch lost).
  mlir::Type i32 = b_.getI32Type();
  auto kept = [&](mlir::Value x) {
    return LLVM::InlineAsmOp::create(b_, i32, ValueRange{x}, b_.getStringAttr(""), b_.getStringAttr("=r,0"),
                                     UnitAttr(), UnitAttr(), LLVM::TailCallKindAttr(), LLVM::AsmDialectAttr(),
                                     ArrayAttr())
        .getResult(0);
  };
  if (mmaRowsWidened(lanes, bits)) { // byte loads (ld.global.u8 into 32-bit registers), no packing
    SmallVector<mlir::Value> bytes;
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t j = 0; j < c; ++j) {
        mlir::Value at = arith::AddIOp::create(b_, first, constant(b_, i64, h * 8 * R + j));
        mlir::Value byte = memref::LoadOp::create(b_, buf, ValueRange{toIndex(b_, at)});
        bytes.push_back(kept(arith::ExtUIOp::create(b_, i32, byte)));
      }
    return vector::FromElementsOp::create(b_, VectorType::get({2 * c}, i32), bytes);
  }
  // The two pieces are assembled as words (i32, or one i16 for 2-byte pieces), so LLVM loads them
  // as such instead of loading bytes and packing them.
  const int64_t wordBits = partBits % 32 == 0 ? 32 : partBits == 16 ? 16 : bits;
  auto asInts = [&](int64_t n, int64_t w) { return VectorType::get({n}, b_.getIntegerType(w)); };
  auto part = VectorType::get({c}, elem);
  mlir::Value words = constant(b_, asInts(2 * partBits / wordBits, wordBits), 0);
  for (int64_t h = 0; h < 2; ++h) {
    mlir::Value at = arith::AddIOp::create(b_, first, constant(b_, i64, h * 8 * R));
    mlir::Value v = vector::LoadOp::create(b_, part, buf, ValueRange{toIndex(b_, at)}, false,
                                           align ? llvm::MaybeAlign(align) : llvm::MaybeAlign());
    v = vector::BitCastOp::create(b_, asInts(partBits / wordBits, wordBits),
                                  arith::BitcastOp::create(b_, asInts(c, bits), v));
    words = vector::InsertStridedSliceOp::create(b_, v, words, ArrayRef<int64_t>{h * partBits / wordBits},
                                                 ArrayRef<int64_t>{1});
  }
  if ((2 * partBits) % 32 == 0) {
    mlir::Value w32 = vector::BitCastOp::create(b_, asInts(2 * partBits / 32, 32), words);
    for (int64_t w = 0; w < 2 * partBits / 32; ++w)
      w32 = vector::InsertOp::create(b_, kept(vector::ExtractOp::create(b_, w32, ArrayRef<int64_t>{w})), w32,
                                     ArrayRef<int64_t>{w});
    words = w32;
  }
  return arith::BitcastOp::create(b_, VectorType::get({2 * c}, elem),
                                  vector::BitCastOp::create(b_, asInts(2 * c, bits), words));
}

// Lane n * 16 + m of each accumulator this thread holds (columns past the tile's give lanes past
// it: they are computed like the others and never read).
mlir::Value Sm90Mma::mmaAccIota(int64_t lanes) {
  mlir::Type i64 = b_.getI64Type();
  const int64_t tiles = (lanes / kMmaM + kMmaN - 1) / kMmaN;
  auto vt = VectorType::get({4 * tiles}, i64);
  SmallVector<int64_t> offsets; // column 8 nt + 2t + i % 2, token g + 8 (i / 2)
  for (int64_t nt = 0; nt < tiles; ++nt)
    for (int64_t i = 0; i < 4; ++i)
      offsets.push_back((nt * kMmaN + i % 2) * kMmaM + 8 * (i / 2));
  mlir::Value lane = e_.gpu().laneI64();
  mlir::Value base = arith::AddIOp::create( // 2t * 16 + g
      b_,
      arith::MulIOp::create(b_, arith::RemSIOp::create(b_, lane, constant(b_, i64, 4)), constant(b_, i64, 2 * kMmaM)),
      arith::DivSIOp::create(b_, lane, constant(b_, i64, 4)));
  return arith::AddIOp::create(b_, vector::BroadcastOp::create(b_, vt, base),
                               arith::ConstantOp::create(b_, DenseElementsAttr::get(vt, ArrayRef<int64_t>(offsets))));
}

// Max over each column's 16 tokens: the thread's two tokens, then the 8 threads of the same t
// (xor 4, 8, 16). Output lane n (held by thread n / L, L = the lanes each thread holds of the
// groups: 1 up to 32 columns, else 2) comes from thread t = (n % 8) / 2, the one whose t holds
// column n's accumulators.
mlir::Value Sm90Mma::mmaAccReduceMaxGroups(mlir::Value acc, int64_t groups) {
  mlir::Type i64 = b_.getI64Type(), f32 = b_.getF32Type();
  const int64_t tiles = cast<VectorType>(acc.getType()).getNumElements() / 4, L = e_.gpu().chunk(groups);
  auto reg = [&](int64_t r) { return vector::ExtractOp::create(b_, acc, ArrayRef<int64_t>{r}).getResult(); };
  mlir::Value lane = e_.gpu().laneI64();
  std::vector<mlir::Value> n, src, out;
  for (int64_t j = 0; j < L; ++j) {
    n.push_back(arith::AddIOp::create(b_, arith::MulIOp::create(b_, lane, constant(b_, i64, L)), constant(b_, i64, j)));
    src.push_back(arith::DivSIOp::create(b_, arith::RemSIOp::create(b_, n[j], constant(b_, i64, kMmaN)),
                                         constant(b_, i64, 2)));
    out.push_back(constant(b_, f32, -std::numeric_limits<double>::infinity()));
  }
  for (int64_t nt = 0; nt < tiles; ++nt)
    for (int64_t odd = 0; odd < 2; ++odd) {
      mlir::Value m = e_.maxNum(reg(4 * nt + odd), reg(4 * nt + 2 + odd));
      for (int32_t x = 4; x < 32; x *= 2)
        m = e_.maxNum(m, e_.gpu().shuffleXor(m, x));
      mlir::Value col = constant(b_, i64, nt * kMmaN + odd);
      for (int64_t j = 0; j < L; ++j) {
        if (L % 2 == 0 && j % 2 != odd)
          continue; // lane n's parity is j's: never this column
        mlir::Value v = e_.gpu().shuffleIdx(m, src[j]);
        mlir::Value mine = arith::CmpIOp::create( // n - (n % 8) / 2 * 2 is 8 nt + odd
            b_, arith::CmpIPredicate::eq,
            arith::SubIOp::create(b_, n[j], arith::MulIOp::create(b_, src[j], constant(b_, i64, 2))), col);
        out[j] = arith::SelectOp::create(b_, mine, v, out[j]);
      }
    }
  if (groups > 2 * threads_)
    e_.fail("reduce.max.groups of mma accumulators: more than two groups per thread");
  return vector::FromElementsOp::create(b_, VectorType::get({L}, f32), out);
}

// This lane's B registers for every column tile, K step and half step: [tile][step][half][b0, b1]
// as a vector of i32 holding f16 pairs, from the staged b bytes (rows past `rows` are zero
// columns). Step s, half h reads K 32t + 8s + 4h + [0, 4) of column g: b0 its first two, b1 its
// last two, as the MmaRows keys' words are split in mmaDotTiles.
mlir::Value Sm90Mma::mmaFragmentsB(mlir::Value stagedBytes, int64_t rows, int64_t first, int64_t last) {
  mlir::Type i64 = b_.getI64Type(), i32 = b_.getI32Type();
  const int64_t steps = kRowK / kMmaK;
  if (last < 0)
    last = (rows + kMmaN - 1) / kMmaN;
  mlir::Value lane = e_.gpu().warpLaneI64(); // every warp of a warpgroup holds the same fragments
  mlir::Value g = arith::DivSIOp::create(b_, lane, constant(b_, i64, 4));
  mlir::Value k32 =
      arith::MulIOp::create(b_, arith::RemSIOp::create(b_, lane, constant(b_, i64, 4)), constant(b_, i64, 32));
  mlir::Value out = constant(b_, VectorType::get({(last - first) * steps * 4}, i32), 0);
  for (int64_t nt = first; nt < last; ++nt) {
    mlir::Value col = arith::AddIOp::create(b_, g, constant(b_, i64, nt * kMmaN));
    mlir::Value has = arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, col, constant(b_, i64, rows));
    mlir::Value row = arith::SelectOp::create(b_, has, col, constant(b_, i64, 0));
    for (int64_t s = 0; s < steps; ++s)
      for (int64_t half = 0; half < 2; ++half) {
        mlir::Value at = arith::AddIOp::create(
            b_, arith::MulIOp::create(b_, row, constant(b_, i64, kRowK)),
            arith::AddIOp::create(b_, k32, constant(b_, i64, s * 8 + half * 4)));
        mlir::Value w = arith::SelectOp::create(b_, has, loadWord(b_, stagedBytes, toIndex(b_, at)),
                                                constant(b_, i32, 0));
        auto [lo, hi] = f16Pairs(w);
        const int64_t at4 = (((nt - first) * steps + s) * 2 + half) * 2;
        auto bits = [&](mlir::Value pair) {
          return vector::ExtractOp::create(
              b_, vector::BitCastOp::create(b_, VectorType::get({1}, i32), pair), ArrayRef<int64_t>{0});
        };
        out = vector::InsertOp::create(b_, bits(lo), out, ArrayRef<int64_t>{at4});
        out = vector::InsertOp::create(b_, bits(hi), out, ArrayRef<int64_t>{at4 + 1});
      }
  }
  return out;
}

int64_t Sm90Mma::mmaStageBytes(int64_t bLanes) {
  const int64_t rows = bLanes / kRowK, tiles = (rows + kMmaN - 1) / kMmaN;
  return mmaBInShared(rows) ? std::max(bLanes, tiles * kMmaBWords * 4 * 32) : bLanes;
}

// Tile nt's B registers of lane l sit at words ((nt * 4 + q) * 32 + l) * 4 + j for register
// 4 q + j: a tile is 2 KB, and each of its 4 reads per lane is one conflict-free 16-byte load of
// the warp's 512 consecutive bytes. They overwrite the staged bytes they come from (a tile's
// fragments take twice its bytes, at most 1 KB), so the upper tiles go first, from tile
// ceil(tiles / 2) on: their fragments start at 2 KB x that, past every staged byte; the lower
// ones are read whole before any of them is written.
void Sm90Mma::mmaFragmentsToShared(mlir::Value buf, int64_t rows) {
  mlir::Type i64 = b_.getI64Type();
  const int64_t tiles = (rows + kMmaN - 1) / kMmaN, half = (tiles + 1) / 2;
  mlir::Value lane = e_.gpu().laneI64();
  auto store = [&](mlir::Value regs, int64_t first, int64_t last) {
    for (int64_t nt = first; nt < last; ++nt)
      for (int64_t q = 0; q < 4; ++q) {
        mlir::Value four = vector::ExtractStridedSliceOp::create(
            b_, regs, ArrayRef<int64_t>{(nt - first) * kMmaBWords + 4 * q}, ArrayRef<int64_t>{4},
            ArrayRef<int64_t>{1});
        mlir::Value at = arith::MulIOp::create(
            b_, arith::AddIOp::create(b_, constant(b_, i64, (nt * 4 + q) * 32), lane), constant(b_, i64, 16));
        vector::StoreOp::create(b_, vector::BitCastOp::create(b_, VectorType::get({16}, b_.getI8Type()), four),
                                buf, ValueRange{toIndex(b_, at)}, false, llvm::MaybeAlign(16));
      }
  };
  store(mmaFragmentsB(buf, rows, half, tiles), half, tiles); // 2 KB * half >= the staged bytes
  mlir::Value low = mmaFragmentsB(buf, rows, 0, half);
  e_.gpu().barrier(); // every lane has read the bytes the lower tiles overwrite
  store(low, 0, half);
  e_.gpu().barrier();
}

mlir::Value Sm90Mma::mmaSharedFragments(mlir::Value buf, int64_t tile) {
  mlir::Type i64 = b_.getI64Type(), i32 = b_.getI32Type();
  mlir::Value lane = e_.gpu().laneI64();
  mlir::Value out = constant(b_, VectorType::get({kMmaBWords}, i32), 0);
  for (int64_t q = 0; q < 4; ++q) {
    mlir::Value at = arith::MulIOp::create(
        b_, arith::AddIOp::create(b_, constant(b_, i64, (tile * 4 + q) * 32), lane), constant(b_, i64, 16));
    mlir::Value v = vector::LoadOp::create(b_, VectorType::get({16}, b_.getI8Type()), buf, ValueRange{toIndex(b_, at)},
                                           false, llvm::MaybeAlign(16));
    out = vector::InsertStridedSliceOp::create(b_, vector::BitCastOp::create(b_, VectorType::get({4}, i32), v),
                                               out, ArrayRef<int64_t>{4 * q}, ArrayRef<int64_t>{1});
  }
  return out;
}

// The 4 e4m3 bytes of an i32 as two f16 pairs (bytes 0-1, 2-3), exactly.
std::pair<mlir::Value, mlir::Value> Sm90Mma::f16Pairs(mlir::Value word) {
  auto h2 = VectorType::get({2}, b_.getF16Type());
  mlir::Value bytes = vector::BitCastOp::create(
      b_, VectorType::get({4}, b_.getI8Type()),
      vector::BroadcastOp::create(b_, VectorType::get({1}, b_.getI32Type()), word));
  auto pair = [&](int64_t at) {
    mlir::Value two = vector::ExtractStridedSliceOp::create(b_, bytes, ArrayRef<int64_t>{at},
                                                            ArrayRef<int64_t>{2}, ArrayRef<int64_t>{1});
    return NVVM::ConvertF8x2ToF16x2Op::create(b_, h2, two, b_.getBoolAttr(false),
                                              TypeAttr::get(b_.getType<Float8E4M3FNType>()))
        .getResult();
  };
  return {pair(0), pair(2)};
}

// Rows g and g + 8 of K step s, half h (words 2s + h of each row) as f16 pairs, in f16 K step
// order 2s + h: a0 (g, K 2t), a1 (g + 8, 2t), a2 (g, 2t + 8), a3 (g + 8, 2t + 8) of m16n8k16, and
// of a warp's 16 rows of wgmma's A.
std::vector<std::array<mlir::Value, 4>> Sm90Mma::mmaFragmentsA(mlir::Value keys) {
  mlir::Type i32 = b_.getI32Type();
  const int64_t words = cast<VectorType>(keys.getType()).getNumElements() / 4;
  mlir::Value aWords = vector::BitCastOp::create(
      b_, VectorType::get({words}, i32),
      arith::BitcastOp::create(b_, VectorType::get({4 * words}, b_.getI8Type()), keys));
  auto word = [&](int64_t w) { return vector::ExtractOp::create(b_, aWords, ArrayRef<int64_t>{w}).getResult(); };
  std::vector<std::array<mlir::Value, 4>> aRegs;
  for (int64_t s = 0; s < kRowK / kMmaK; ++s)
    for (int64_t half = 0; half < 2; ++half) {
      auto [g0, g1] = f16Pairs(word(2 * s + half));
      auto [e0, e1] = f16Pairs(word(words / 2 + 2 * s + half));
      aRegs.push_back({g0, e0, g1, e1});
    }
  return aRegs;
}

// Keys in MmaRows order are A fragments already: words 2s, 2s + 1 of row g and of row g + 8 are
// step s's a0, a2 and a1, a3 of an m16n8k32 e4m3 mma; each word widened to two f16 pairs makes
// the a0/a2 (a1/a3) of one m16n8k16 half step. 4 K steps x (1 or 2) column tiles of mma.sync; the
// accumulators are the result (MmaAcc).
mlir::Value Sm90Mma::mmaDotTiles(tile::DotTilesOp op) {
  mlir::Type f32 = b_.getF32Type(), i32 = b_.getI32Type();
  const mlir::Value bId = op.getRhs();
  if (!e_.stagedDotOperands().count(bId))
    e_.stageDotOperand(bId, e_.get(bId), /*barrierBefore=*/true);
  const int64_t N = cast<ShapedType>(bId.getType()).getNumElements() / kRowK, tiles = (N + kMmaN - 1) / kMmaN;
  const int64_t steps = kRowK / kMmaK;
  const bool bShared = state_.mmaBShared.count(bId) > 0;
  mlir::Value bRegs = bShared ? mlir::Value() : state_.fragmentsB.lookup(bId);
  auto h2 = VectorType::get({2}, b_.getF16Type());
  auto accType = LLVM::LLVMStructType::getLiteral(b_.getContext(), {f32, f32, f32, f32});
  const std::vector<std::array<mlir::Value, 4>> aRegs = mmaFragmentsA(e_.get(op.getLhs()));
  std::vector<mlir::Value> acc; // [tile][c0..c3]
  for (int64_t nt = 0; nt < tiles; ++nt) {
    std::vector<mlir::Value> c(4, constant(b_, f32, 0));
    mlir::Value tileRegs = bShared ? mmaSharedFragments(state_.mmaBShared.lookup(bId), nt) : bRegs;
    const int64_t base = bShared ? 0 : nt * kMmaBWords;
    for (int64_t s = 0; s < steps; ++s)
      for (int64_t half = 0; half < 2; ++half) {
        SmallVector<mlir::Value> args(aRegs[2 * s + half].begin(), aRegs[2 * s + half].end());
        for (int64_t i = 0; i < 2; ++i)
          args.push_back(vector::BitCastOp::create(
              b_, h2,
              vector::BroadcastOp::create(
                  b_, VectorType::get({1}, i32),
                  vector::ExtractOp::create(b_, tileRegs, ArrayRef<int64_t>{base + (s * 2 + half) * 2 + i}))));
        args.append(c.begin(), c.end());
        mlir::Value d = LLVM::CallIntrinsicOp::create(b_, accType, b_.getStringAttr(kMmaIntrinsic), args)
                            .getResult(0);
        for (int64_t i = 0; i < 4; ++i)
          c[i] = LLVM::ExtractValueOp::create(b_, d, ArrayRef<int64_t>{i});
      }
    acc.insert(acc.end(), c.begin(), c.end());
  }
  // In a warpgroup, warp w's m16n8 C of tile nt is registers 4 nt.. 4 nt + 3 of m64nN's D
  // (tokens 16 w + g and + 8): the WgmmaAcc order (Sm90Wgmma.cpp), so the result is the same.
  // sm_90's layout pass gives every dot whose keys are MmaRows accumulators (a convert_layout
  // follows where its results are read blocked: accToBlocked).
  if (const Spread result = tile::layoutOf(op.getType()); result != Spread::MmaAcc && result != Spread::WgmmaAcc)
    e_.fail("sm_90: an mma.sync dot.tiles whose results are not in accumulators");
  return vector::FromElementsOp::create(b_, VectorType::get({4 * tiles}, f32), acc);
}

// MmaAcc registers c[i] of tile nt are token g + 8 (i / 2) against column 8 nt + 2 t + i % 2:
// each written to lane (column * 16 + token) of the buffer where that column exists, then read
// back blocked.
mlir::Value Sm90Mma::accToBlocked(mlir::Value acc, int64_t lanes, mlir::Value buffer) {
  mlir::Type i64 = b_.getI64Type(), f32 = b_.getF32Type();
  const int64_t N = lanes / kMmaM, tiles = cast<VectorType>(acc.getType()).getNumElements() / 4;
  mlir::Value lane = e_.gpu().laneI64();
  mlir::Value g = arith::DivSIOp::create(b_, lane, constant(b_, i64, 4));
  mlir::Value t = arith::RemSIOp::create(b_, lane, constant(b_, i64, 4));
  for (int64_t nt = 0; nt < tiles; ++nt)
    for (int64_t i = 0; i < 4; ++i) {
      mlir::Value col = arith::AddIOp::create(b_, arith::MulIOp::create(b_, t, constant(b_, i64, 2)),
                                              constant(b_, i64, nt * kMmaN + i % 2));
      mlir::Value m = arith::AddIOp::create(b_, g, constant(b_, i64, 8 * (i / 2)));
      auto exists = scf::IfOp::create(
          b_, TypeRange{}, arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, col, constant(b_, i64, N)), false);
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPoint(exists.thenBlock()->getTerminator());
      mlir::Value at = arith::AddIOp::create(b_, arith::MulIOp::create(b_, col, constant(b_, i64, kMmaM)), m);
      memref::StoreOp::create(b_, vector::ExtractOp::create(b_, acc, ArrayRef<int64_t>{4 * nt + i}), buffer,
                              ValueRange{toIndex(b_, at)});
    }
  e_.gpu().barrier();
  mlir::Value out = e_.gpu().loadTile(buffer, constant(b_, i64, 0), lanes, f32);
  e_.gpu().barrier(); // the buffer is written again by the next conversion
  return out;
}

Sm90Part::Sm90Part(Sm90Program &p)
    : p_(p), e_(p.e_), b_(p.b_), threads_(p.threads_), state_(p.state_) {}

} // namespace m3idx::lowering
