// dot.tiles on Hopper's warpgroup MMA (sm_90a): programs of 4 warps run wgmma.mma_async
// m64nNk16 f32.f16.f16 with 64 key tokens as A, in registers (each warp's 16 tokens in the
// MmaRows fragment order mma.sync takes, widened to f16 as there), and N query
// columns (a multiple of 8 up to 128) as B in shared memory as f16 (e4m3 widens exactly), sums in f32 as mma.sync f16 has them (fp8
// wgmma's sums are not fp32: bench/RESULTS.md). Keys never touch shared memory:
// with keys as B in shared memory (written per tile, a barrier per tile) the L1/shared pipe was
// 90% busy and prefill 4 x 32K H=1 scored in 2.62 ms (bench/RESULTS.md).
//
// B's layout (PTX ISA, "Shared memory matrix layout", K-major, 128B swizzle): N rows x 128 f16
// are two atoms of N rows x 64 elements (128 bytes per row, atom a at a * N * 128); rows go in
// groups of 8 (1024 bytes), and the 16-byte chunk c of row r sits at chunk c ^ (r % 8). A
// descriptor holds the start address / 16, the leading-dimension offset (unused for swizzled
// K-major: 1), the stride between 8-row groups (1024 / 16) and the swizzle mode (1 = 128B, bits
// 62-63); K step S of 16 starts 32 * (S % 4) bytes into atom S / 4. The buffer is 1024-byte
// aligned (the swizzle's period), so no base offset is needed. The keys' K order is the MmaRows
// one (step S = 2s + h takes elements 32t + 8s + 4h + [0, 4) of the thread's quarter row, split
// in pairs between K 2t and 2t + 8), so B is staged in that order too.
//
// D of m64nNk16 (f32): warp w holds tokens 16w + g and 16w + g + 8 (g = lane / 4 in the warp),
// and for each 8-column chunk i < N / 8 registers 4i..4i+3: (token, column 8i + 2t), (token, 8i + 2t +
// 1), (token + 8, 8i + 2t), (token + 8, 8i + 2t + 1), t = lane % 4 -- Spread::WgmmaAcc.
#include <limits>

#include "lowering/nvvm/Sm90Program.h"
#include "lowering/nvvm/WgmmaShape.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace m3idx::lowering {

using namespace mlir;

namespace {
constexpr int64_t kRowK = 128, kStepK = 16, kAtomBytes = 128, kGroupBytes = 1024, kWarps = 4;

// An f16 pair as the 32-bit register PTX takes it.
mlir::Value pairBits(ImplicitLocOpBuilder &b, mlir::Value pair) {
  return vector::ExtractOp::create(b, vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), pair),
                                   ArrayRef<int64_t>{0});
}
} // namespace

// 64 key tokens (16 per warp) against N query columns of 128-element rows (N a multiple of 8 up
// to 128: wgmma's n), on a 4-warp program.
bool Sm90Wgmma::wgmmaFits(tile::DotTilesOp op) const { return wgmmaTakes(p_.dotShape(op)); }

bool Sm90Wgmma::wgmmaRuns(tile::DotTilesOp op) const {
  return wgmmaFits(op) && tile::layoutOf(op.getLhs().getType()) == Spread::MmaRows;
}

// Element `dim` (a multiple of 8) of row `row` of a `rows`-row matrix: its 16-byte chunk's offset.
static mlir::Value swizzledChunk(ImplicitLocOpBuilder &b, int64_t rows, mlir::Value row, mlir::Value dim) {
  auto c = [&](int64_t v) { return arith::ConstantOp::create(b, b.getI64IntegerAttr(v)).getResult(); };
  mlir::Value atom = arith::DivUIOp::create(b, dim, c(64));
  mlir::Value chunk = arith::DivUIOp::create(b, arith::RemUIOp::create(b, dim, c(64)), c(8));
  mlir::Value r8 = arith::RemUIOp::create(b, row, c(8));
  mlir::Value at = arith::AddIOp::create(
      b, arith::MulIOp::create(b, atom, c(rows * kAtomBytes)),
      arith::AddIOp::create(b, arith::MulIOp::create(b, arith::DivUIOp::create(b, row, c(8)), c(kGroupBytes)),
                            arith::MulIOp::create(b, r8, c(kAtomBytes))));
  return arith::AddIOp::create(b, at, arith::MulIOp::create(b, arith::XOrIOp::create(b, chunk, r8), c(16)));
}

// The queries (N rows x 128 bytes, blocked over the threads) to B's layout, through B's
// own buffer: the raw rows first, then each thread gathers the K pairs of its (row, half) slots
// -- half h of row r is K steps [4h, 4h + 4), 16 elements each, in the keys' K order -- and after
// a barrier widens them to f16 and stores them swizzled; the writes are then made visible to
// wgmma (the async proxy) and every thread's awaited.
void Sm90Wgmma::wgmmaStageColumns(mlir::Value bBuf, mlir::Value queries, int64_t lanes) {
  mlir::Type i64 = b_.getI64Type(), i32 = b_.getI32Type(), i8 = b_.getI8Type();
  // 2N (row, half) slots, `slots` a thread; a thread past the last slot (N not a multiple of 64)
  // reads the last one (every thread reaches both barriers) and stores nothing.
  const int64_t N = lanes / kRowK, slots = (2 * N + threads_ - 1) / threads_;
  e_.gpu().storeTile(bBuf, constant(b_, i64, 0), queries, lanes);
  e_.gpu().barrier();
  struct Slot {
    mlir::Value row, half, real; // real: an i1, the slot is this thread's own
    std::vector<mlir::Value> pairs; // [chunk j][t'] as the low half of an i32
  };
  std::vector<Slot> mine;
  for (int64_t p = 0; p < slots; ++p) {
    Slot s;
    mlir::Value own = arith::AddIOp::create(b_, arith::MulIOp::create(b_, e_.gpu().laneI64(), constant(b_, i64, slots)),
                                            constant(b_, i64, p));
    s.real = arith::CmpIOp::create(b_, arith::CmpIPredicate::ult, own, constant(b_, i64, 2 * N));
    mlir::Value slot = arith::MinUIOp::create(b_, own, constant(b_, i64, 2 * N - 1));
    s.row = arith::DivUIOp::create(b_, slot, constant(b_, i64, 2));
    s.half = arith::RemUIOp::create(b_, slot, constant(b_, i64, 2));
    // step S = 4 half + j / 2 = 2s + h with s = 2 half + j / 4, h = (j / 2) % 2; chunk parity j % 2
    mlir::Value base = arith::AddIOp::create(b_, arith::MulIOp::create(b_, s.row, constant(b_, i64, kRowK)),
                                             arith::MulIOp::create(b_, s.half, constant(b_, i64, 16)));
    for (int64_t j = 0; j < 8; ++j)
      for (int64_t t = 0; t < 4; ++t) {
        const int64_t at = 32 * t + 8 * (j / 4) + 4 * ((j / 2) % 2) + 2 * (j % 2);
        mlir::Value two =
            vector::LoadOp::create(b_, VectorType::get({2}, i8), bBuf,
                                   ValueRange{toIndex(b_, arith::AddIOp::create(b_, base, constant(b_, i64, at)))},
                                   false, llvm::MaybeAlign(2));
        s.pairs.push_back(vector::ExtractOp::create(
            b_,
            vector::BitCastOp::create(
                b_, VectorType::get({1}, i32),
                vector::InsertStridedSliceOp::create(b_, two, constant(b_, VectorType::get({4}, i8), 0),
                                                     ArrayRef<int64_t>{0}, ArrayRef<int64_t>{1})),
            ArrayRef<int64_t>{0}));
      }
    mine.push_back(std::move(s));
  }
  e_.gpu().barrier(); // every raw byte is read before B is written over them
  for (const Slot &s : mine) {
    OpBuilder::InsertionGuard guard(b_);
    if (2 * N % threads_ != 0) {
      auto own = scf::IfOp::create(b_, TypeRange{}, s.real, false);
      b_.setInsertionPoint(own.thenBlock()->getTerminator());
    }
    for (int64_t j = 0; j < 8; ++j) {
      SmallVector<mlir::Value> four; // the chunk's K pairs 2t' (t' = 0..3) as f16x2 words
      for (int64_t t = 0; t < 4; ++t)
        four.push_back(pairBits(b_, p_.mma().f16Pairs(s.pairs[4 * j + t]).first));
      mlir::Value chunk = vector::FromElementsOp::create(b_, VectorType::get({4}, i32), four);
      mlir::Value dim = arith::AddIOp::create(b_, arith::MulIOp::create(b_, s.half, constant(b_, i64, 64)),
                                              constant(b_, i64, 8 * j));
      vector::StoreOp::create(b_, vector::BitCastOp::create(b_, VectorType::get({16}, i8), chunk), bBuf,
                              ValueRange{toIndex(b_, swizzledChunk(b_, N, s.row, dim))}, false, llvm::MaybeAlign(16));
    }
  }
  NVVM::FenceProxyOp::create(b_, NVVM::ProxyKind::async_shared,
                             NVVM::SharedSpaceAttr::get(b_.getContext(), NVVM::SharedSpace::shared_cta));
  e_.gpu().barrier();
}

// B's descriptor at K step `step`.
mlir::Value Sm90Wgmma::wgmmaDescriptor(mlir::Value buf, int64_t step) {
  mlir::Type i64 = b_.getI64Type();
  mlir::Value base = arith::IndexCastOp::create(
      b_, i64, memref::ExtractAlignedPointerAsIndexOp::create(b_, buf).getResult());
  const int64_t offset = (step / 4) * state_.wgmmaColumns * kAtomBytes + (step % 4) * 32;
  mlir::Value start = arith::ShRUIOp::create(
      b_,
      arith::AndIOp::create(b_, arith::AddIOp::create(b_, base, constant(b_, i64, offset)), constant(b_, i64, 0x3FFFF)),
      constant(b_, i64, 4));
  const uint64_t fixed = (uint64_t{1} << 16) | (uint64_t{kGroupBytes / 16} << 32) | (uint64_t{1} << 62);
  return arith::OrIOp::create(b_, start, arith::ConstantOp::create(b_, b_.getI64IntegerAttr(static_cast<int64_t>(fixed))));
}

// 8 K steps of wgmma (A from registers: MLIR 22's nvvm.wgmma.mma_async takes A only from shared
// memory, so the instruction is inline PTX), committed and waited for here. (Waiting where the
// result is first used, with the kernel folding each tile's dots into the max one tile later so
// they overlap the next tile's decode, measured no faster: bench/RESULTS.md.)
mlir::Value Sm90Wgmma::wgmmaDotTiles(tile::DotTilesOp op) {
  mlir::Type f32 = b_.getF32Type();
  const mlir::Value bId = op.getRhs();
  if (!e_.stagedDotOperands().count(bId))
    e_.stageDotOperand(bId, e_.get(bId), /*barrierBefore=*/true);
  const std::vector<std::array<mlir::Value, 4>> aRegs = p_.mma().mmaFragmentsA(e_.get(op.getLhs()));
  const int64_t regs = state_.wgmmaColumns * kWgmmaTokens / threads_;
  SmallVector<mlir::Type> fields(regs, f32);
  auto accType = LLVM::LLVMStructType::getLiteral(b_.getContext(), fields);
  mlir::Value acc = LLVM::PoisonOp::create(b_, accType);
  mlir::Value bBuf = e_.stagedDotOperands().lookup(bId);
  std::string d, constraints;
  for (int64_t r = 0; r < regs; ++r) {
    d += fmt::format("{}${}", r ? ", " : "", r);
    constraints += "=f,";
  }
  for (int64_t r = 0; r < regs; ++r)
    constraints += fmt::format("{},", r);
  constraints += "r,r,r,r,l";
  NVVM::WgmmaFenceAlignedOp::create(b_);
  for (int64_t s = 0; s < kRowK / kStepK; ++s) {
    // scale-d 0 on the first step: D = A B (the poison inputs are not read)
    const std::string text = fmt::format(
        "{{\n.reg .pred p;\nsetp.ne.b32 p, {}, 0;\nwgmma.mma_async.sync.aligned.m64n{}k16.f32.f16.f16 "
        "{{{}}}, {{${}, ${}, ${}, ${}}}, ${}, p, 1, 1, 0;\n}}",
        s == 0 ? 0 : 1, state_.wgmmaColumns, d, 2 * regs, 2 * regs + 1, 2 * regs + 2, 2 * regs + 3, 2 * regs + 4);
    SmallVector<mlir::Value> operands;
    for (int64_t r = 0; r < regs; ++r)
      operands.push_back(LLVM::ExtractValueOp::create(b_, acc, ArrayRef<int64_t>{r}));
    for (mlir::Value a : aRegs[s])
      operands.push_back(pairBits(b_, a));
    operands.push_back(wgmmaDescriptor(bBuf, s));
    acc = LLVM::InlineAsmOp::create(b_, accType, operands, b_.getStringAttr(text), b_.getStringAttr(constraints),
                                    /*has_side_effects=*/UnitAttr::get(b_.getContext()), UnitAttr(),
                                    LLVM::TailCallKindAttr(), LLVM::AsmDialectAttr(), ArrayAttr())
              .getResult(0);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b_);
  NVVM::WgmmaWaitGroupSyncOp::create(b_, 0);
  SmallVector<mlir::Value> dv;
  for (int64_t r = 0; r < regs; ++r)
    dv.push_back(LLVM::ExtractValueOp::create(b_, acc, ArrayRef<int64_t>{r}));
  return vector::FromElementsOp::create(b_, VectorType::get({regs}, f32), dv);
}

// Lane n * 64 + m (column n, token m) of each accumulator this thread holds.
mlir::Value Sm90Wgmma::wgmmaAccIota(int64_t lanes) {
  mlir::Type i64 = b_.getI64Type();
  const int64_t M = kWgmmaTokens, regs = lanes / threads_;
  auto vt = VectorType::get({regs}, i64);
  SmallVector<int64_t> offsets;
  for (int64_t r = 0; r < regs; ++r) // chunk r / 4, token half (r / 2) % 2, column parity r % 2
    offsets.push_back((8 * (r / 4) + r % 2) * M + 8 * ((r / 2) % 2));
  mlir::Value lane = e_.gpu().laneI64();
  mlir::Value token = arith::AddIOp::create( // 16 w + g
      b_, arith::MulIOp::create(b_, arith::DivUIOp::create(b_, lane, constant(b_, i64, 32)), constant(b_, i64, 16)),
      arith::DivUIOp::create(b_, arith::RemUIOp::create(b_, lane, constant(b_, i64, 32)), constant(b_, i64, 4)));
  mlir::Value column =
      arith::MulIOp::create(b_, arith::RemUIOp::create(b_, lane, constant(b_, i64, 4)), constant(b_, i64, 2));
  mlir::Value base = arith::AddIOp::create(b_, arith::MulIOp::create(b_, column, constant(b_, i64, M)), token);
  return arith::AddIOp::create(b_, vector::BroadcastOp::create(b_, vt, base),
                               arith::ConstantOp::create(b_, DenseElementsAttr::get(vt, ArrayRef<int64_t>(offsets))));
}

// The max of each thread's two tokens per column: tokens g and g + 8 are its registers 4i + p and
// 4i + 2 + p, so folding them is in-thread, into WgmmaAccFolded order (register 2i + p).
mlir::Value Sm90Wgmma::wgmmaAccFoldThreadTokens(mlir::Value acc) {
  const int64_t regs = cast<VectorType>(acc.getType()).getNumElements();
  SmallVector<mlir::Value> folded;
  for (int64_t r = 0; r < regs; r += 4)
    for (int64_t p = 0; p < 2; ++p)
      folded.push_back(e_.maxNum(vector::ExtractOp::create(b_, acc, ArrayRef<int64_t>{r + p}),
                              vector::ExtractOp::create(b_, acc, ArrayRef<int64_t>{r + 2 + p})));
  return vector::FromElementsOp::create(b_, VectorType::get({regs / 2}, b_.getF32Type()), folded);
}

// fold.max of accumulators: only pairs 8 apart (a thread's two tokens), kept in WgmmaAccFolded.
mlir::Value Sm90Wgmma::wgmmaAccFoldMax(mlir::Value acc, int64_t pairs, Spread result) {
  if ((pairs != 8 || result != Spread::WgmmaAccFolded))
    e_.fail(pairs != 8 ? fmt::format("fold.max of wgmma accumulators: pairs {} apart (only 8: a thread's tokens)", pairs)
                        : std::string("fold.max of wgmma accumulators read in blocked order"));
  return wgmmaAccFoldThreadTokens(acc);
}

// Max over each column's tokens: the thread's two (folded already if `folded`), then the 8
// threads of its t in the warp (lane bits 2-4), then the 4 warps through a 4 x N exchange buffer,
// where thread n of the blocked N-lane result takes the max of column n's 4 rows. Where a thread
// holds a multiple of 8 maxima (N a multiple of 32) the 8 threads reduce them as a transposing
// butterfly: at xor 16, 8 and 4 each thread sends half of what it holds and keeps the max of the
// other half with its partner's, so that after 3 stages it holds R / 8 columns' warp maxima
// (register r = (R / 8) g + k of the R) and writes them itself: R / 2 + R / 4 + R / 8 shuffles
// where a plain butterfly over every register takes 3 R (N = 128: 28 against 96), and no
// thread waits for a leader's stores. Otherwise (N = 24) every register is reduced by xor 4, 8,
// 16 and the warp's lanes 0-3 write. Two exchange buffers are used in turn, so one barrier per
// reduction suffices: a thread writes an exchange again only after the next reduction's barrier,
// which every reader of it has passed (ncu: barrier stalls were 14% of the score loop's stall
// cycles with two barriers).
mlir::Value Sm90Wgmma::wgmmaAccReduceMaxGroups(mlir::Value acc, int64_t groups, bool folded) {
  mlir::Type i64 = b_.getI64Type(), f32 = b_.getF32Type();
  if (!folded)
    acc = wgmmaAccFoldThreadTokens(acc);
  const int64_t regs = cast<VectorType>(acc.getType()).getNumElements(); // 2 per 8-column chunk
  if (groups != state_.wgmmaColumns)
    e_.fail(fmt::format("reduce.max.groups of wgmma accumulators: {} groups (expected {})", groups,
                         state_.wgmmaColumns));
  mlir::Value lane = e_.gpu().laneI64();
  mlir::Value zero = toIndex(b_, constant(b_, i64, 0));
  mlir::Value exchange = memref::LoadOp::create(b_, state_.wgmmaExchangeAt, ValueRange{zero});
  memref::StoreOp::create(b_, arith::XOrIOp::create(b_, exchange, constant(b_, i64, 4 * state_.wgmmaColumns)),
                          state_.wgmmaExchangeAt, ValueRange{zero});
  mlir::Value warp = arith::DivUIOp::create(b_, lane, constant(b_, i64, 32));
  mlir::Value rowAt = arith::AddIOp::create(
      b_, exchange,
      arith::AddIOp::create(b_, arith::MulIOp::create(b_, warp, constant(b_, i64, state_.wgmmaColumns)),
                            arith::MulIOp::create(b_, arith::RemUIOp::create(b_, lane, constant(b_, i64, 4)),
                                                  constant(b_, i64, 2))));
  // Register r (2 per 8-column chunk) holds column 8 (r / 2) + 2 t + r % 2: rowAt has the 2 t.
  auto storeRegister = [&](mlir::Value r, mlir::Value m) {
    mlir::Value col = arith::AddIOp::create(
        b_, arith::MulIOp::create(b_, arith::DivUIOp::create(b_, r, constant(b_, i64, 2)), constant(b_, i64, 8)),
        arith::RemUIOp::create(b_, r, constant(b_, i64, 2)));
    memref::StoreOp::create(b_, m, state_.wgmmaExchange, ValueRange{toIndex(b_, arith::AddIOp::create(b_, rowAt, col))});
  };
  std::vector<mlir::Value> held;
  for (int64_t r = 0; r < regs; ++r)
    held.push_back(vector::ExtractOp::create(b_, acc, ArrayRef<int64_t>{r}));
  mlir::Value laneInWarp = arith::RemUIOp::create(b_, lane, constant(b_, i64, 32));
  if (regs % 8 == 0) {
    // Stage xor x keeps half h of `held` where the lane's bit x is h; after the 3 stages thread g
    // holds registers (R / 8) g + k, k < R / 8 (g's bit 0 weighs R / 8, bit 1 R / 4, bit 2 R / 2).
    for (int32_t x = 16; x >= 4; x /= 2) {
      mlir::Value upper = arith::CmpIOp::create(
          b_, arith::CmpIPredicate::ne, arith::AndIOp::create(b_, laneInWarp, constant(b_, i64, x)), constant(b_, i64, 0));
      const size_t half = held.size() / 2;
      std::vector<mlir::Value> kept;
      for (size_t k = 0; k < half; ++k) {
        mlir::Value mine = arith::SelectOp::create(b_, upper, held[k + half], held[k]);
        mlir::Value theirs = arith::SelectOp::create(b_, upper, held[k], held[k + half]);
        kept.push_back(e_.maxNum(mine, e_.gpu().shuffleXor(theirs, x)));
      }
      held = std::move(kept);
    }
    const int64_t per = regs / 8;
    mlir::Value g = arith::DivUIOp::create(b_, laneInWarp, constant(b_, i64, 4));
    for (int64_t k = 0; k < per; ++k)
      storeRegister(arith::AddIOp::create(b_, arith::MulIOp::create(b_, g, constant(b_, i64, per)), constant(b_, i64, k)),
                    held[k]);
  } else {
    mlir::Value leader = arith::CmpIOp::create(b_, arith::CmpIPredicate::ult, laneInWarp, constant(b_, i64, 4));
    for (mlir::Value &m : held)
      for (int32_t x = 4; x < 32; x *= 2)
        m = e_.maxNum(m, e_.gpu().shuffleXor(m, x));
    auto mine = scf::IfOp::create(b_, TypeRange{}, leader, false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(mine.thenBlock()->getTerminator());
    for (int64_t r = 0; r < regs; ++r)
      storeRegister(constant(b_, i64, r), held[r]);
  }
  e_.gpu().barrier();
  mlir::Value n = arith::AddIOp::create(
      b_, exchange, arith::SelectOp::create(b_, e_.gpu().laneBelow(groups), lane, constant(b_, i64, 0)));
  mlir::Value best = constant(b_, f32, -std::numeric_limits<double>::infinity());
  for (int64_t w = 0; w < kWarps; ++w)
    best = e_.maxNum(
        best, memref::LoadOp::create(
                  b_, state_.wgmmaExchange,
                  ValueRange{toIndex(b_, arith::AddIOp::create(b_, n, constant(b_, i64, w * state_.wgmmaColumns)))}));
  return vector::BroadcastOp::create(b_, VectorType::get({1}, f32), best);
}

} // namespace m3idx::lowering
