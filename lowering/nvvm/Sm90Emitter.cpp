// The sm_90 parts of the DSL's GPU form (see EmitterImpl.h): the NVFP4 decode as per-scale key
// tables (rounded by cvt.rn.satfinite.e4m3x2.f16x2) looked up with prmt, and dot.tiles on the
// tensor cores as mma.sync m16n8k32 e4m3.
//
// mma.sync.m16n8k32.row.col.f32.e4m3.e4m3.f32 (PTX ISA, warp-level matrix fragments), with
// g = lane / 4 and t = lane % 4: A registers a0..a3 hold 4 bytes each of rows g, g+8, g, g+8 at
// K 4t, 4t, 4t+16, 4t+16; B registers b0, b1 hold K 4t and 4t+16 of column g; C/D c0..c3 are
// rows g, g, g+8, g+8 at columns 2t, 2t+1, 2t, 2t+1. MLIR 22's nvvm.mma.sync does not accept
// e4m3 yet, so the LLVM intrinsic is called by name (it needs PTX ISA 8.4).
#include <limits>

#include "core/Spec.h"
#include "lowering/EmitterImpl.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace m3idx::lowering {

using namespace mlir;

namespace {
constexpr int64_t kMmaM = 16, kMmaN = 8, kMmaK = 32, kRowK = 128;
constexpr const char *kMmaIntrinsic = "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e4m3.f32";
} // namespace

// SPEC §2 through byte permutes. Per scale group, the 8 key bytes of the positive E2M1 codes
// (0, 0.5, 1, 1.5, 2, 3, 4, 6) times the scale: those products are exact in f16 (at most 6
// significant bits, between 2^-10 and 2688), so cvt.rn.satfinite.e4m3x2.f16x2 is the only rounding
// (to nearest even, |x| > 448 to +-448, NaN to 0x7F), as in SPEC's fp32 formulation. Then one
// prmt looks up 4 elements at once (the packed nibbles, sign bits masked, are its selectors), and
// the nibbles' sign bits are moved to bit 7 of each byte and XORed in (the table already carries
// the scale's sign; rounding is symmetric; a NaN scale gives 0x7F or 0xFF, both NaN, and a NaN
// dot is dropped from the max either way).
mlir::Value Emitter::sm90DecodeNvfp4(mlir::Value packed, mlir::Value scales) {
  const int64_t P = cast<VectorType>(packed.getType()).getNumElements(), N = 2 * P;
  mlir::Type i16 = b_.getI16Type(), i32 = b_.getI32Type(), f16 = b_.getF16Type();
  auto h2 = VectorType::get({2}, f16);
  if (P % 4 != 0) {
    if (error_.empty())
      error_ = fmt::format("nvfp4.decode: {} packed bytes per thread is not whole words", P);
    return constant(VectorType::get({N}, b_.getType<Float8E4M3FNType>()), 0);
  }
  auto c32 = [&](uint32_t v) { return constant(i32, static_cast<double>(static_cast<int32_t>(v))); };
  auto prmt = [&](mlir::Value lo, mlir::Value hi, mlir::Value sel) {
    return NVVM::PermuteOp::create(b_, i32, lo, hi, sel, NVVM::PermuteMode::DEFAULT).getResult();
  };
  mlir::Value scaleBytes = gpuThreadScales(scales, N);
  const int64_t S = cast<VectorType>(scaleBytes.getType()).getNumElements();
  mlir::Value scaleF = arith::ExtFOp::create(
      b_, VectorType::get({S}, b_.getF32Type()),
      arith::BitcastOp::create(b_, VectorType::get({S}, b_.getType<Float8E4M3FNType>()), scaleBytes)
          .getResult());
  std::vector<std::pair<mlir::Value, mlir::Value>> tables; // per group: key bytes of codes 0-3, 4-7
  for (int64_t g = 0; g < S; ++g) {
    mlir::Value sc = vector::BroadcastOp::create(
        b_, h2, arith::TruncFOp::create(b_, f16, vector::ExtractOp::create(b_, scaleF, ArrayRef<int64_t>{g})));
    mlir::Value pair[4];
    const double mags[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    for (int i = 0; i < 4; ++i) {
      mlir::Value m = arith::ConstantOp::create(
          b_, DenseElementsAttr::get(h2, ArrayRef<mlir::Attribute>{b_.getF16FloatAttr(mags[2 * i]),
                                                                   b_.getF16FloatAttr(mags[2 * i + 1])}));
      // lane 0 lands in the low byte (halves keep their place)
      pair[i] = arith::ExtUIOp::create(
          b_, i32,
          NVVM::ConvertF16x2ToF8x2Op::create(b_, i16, arith::MulFOp::create(b_, m, sc), false,
                                             b_.getType<Float8E4M3FNType>()));
    }
    tables.push_back({arith::OrIOp::create(b_, pair[0], arith::ShLIOp::create(b_, pair[1], c32(16))),
                      arith::OrIOp::create(b_, pair[2], arith::ShLIOp::create(b_, pair[3], c32(16)))});
  }
  const int64_t W = P / 4;
  mlir::Value words = vector::BitCastOp::create(b_, VectorType::get({W}, i32), packed);
  mlir::Value out = constant(VectorType::get({2 * W}, i32), 0);
  mlir::Value zero = c32(0);
  for (int64_t w = 0; w < W; ++w) { // 8 elements of one scale group
    mlir::Value x = vector::ExtractOp::create(b_, words, ArrayRef<int64_t>{w});
    auto [lo, hi] = tables[S == 1 ? 0 : (8 * w) / 16];
    mlir::Value codes = arith::AndIOp::create(b_, x, c32(0x77777777));
    for (int half = 0; half < 2; ++half) { // elements 4 half .. 4 half + 3
      mlir::Value sel = half ? mlir::Value(arith::ShRUIOp::create(b_, codes, c32(16))) : codes;
      mlir::Value mag = prmt(lo, hi, sel);
      // Bytes [B, B, B', B'] of the packed pair: sign of element 2i at bit 3, of 2i+1 at bit 7.
      mlir::Value u = prmt(x, zero, c32(half ? 0x3322 : 0x1100));
      mlir::Value sign = arith::OrIOp::create(
          b_, arith::AndIOp::create(b_, arith::ShLIOp::create(b_, u, c32(4)), c32(0x00800080)),
          arith::AndIOp::create(b_, u, c32(0x80008000)));
      out = vector::InsertOp::create(b_, arith::XOrIOp::create(b_, mag, sign), out,
                                     ArrayRef<int64_t>{2 * w + half});
    }
  }
  mlir::Value bytes = vector::BitCastOp::create(b_, VectorType::get({N}, b_.getI8Type()), out);
  return arith::BitcastOp::create(b_, VectorType::get({N}, b_.getType<Float8E4M3FNType>()), bytes);
}

bool Emitter::mmaFits(const dsl::Op &op) const {
  const dsl::Type a = k_.typeOf(op.operands[0]), b = k_.typeOf(op.operands[1]);
  return !gfx950_ && threads_ == 32 && a.elem == Elem::F8E4M3FN && op.intAttr == kRowK &&
         a.lanes == kMmaM * kRowK && b.lanes % kRowK == 0 && b.lanes / kRowK <= 2 * kMmaN;
}

namespace {
mlir::Value loadWord(ImplicitLocOpBuilder &b, mlir::Value buf, mlir::Value at) {
  mlir::Value v = vector::LoadOp::create(b, VectorType::get({4}, b.getI8Type()), buf, ValueRange{at},
                                         false, llvm::MaybeAlign(4));
  return vector::ExtractOp::create(
      b, vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), v), ArrayRef<int64_t>{0});
}
} // namespace

// This lane's B registers for every column tile and K step: [tile][step][b0, b1] as a vector of
// i32, from the staged b bytes (rows past `rows` are zero columns).
mlir::Value Emitter::mmaFragmentsB(mlir::Value stagedBytes, int64_t rows) {
  mlir::Type i64 = b_.getI64Type(), i32 = b_.getI32Type();
  const int64_t tiles = (rows + kMmaN - 1) / kMmaN, steps = kRowK / kMmaK;
  mlir::Value lane = laneI64();
  mlir::Value g = arith::DivSIOp::create(b_, lane, constant(i64, 4));
  mlir::Value k4 = arith::MulIOp::create(b_, arith::RemSIOp::create(b_, lane, constant(i64, 4)), constant(i64, 4));
  mlir::Value out = constant(VectorType::get({tiles * steps * 2}, i32), 0);
  for (int64_t nt = 0; nt < tiles; ++nt) {
    mlir::Value col = arith::AddIOp::create(b_, g, constant(i64, nt * kMmaN));
    mlir::Value has = arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, col, constant(i64, rows));
    mlir::Value row = arith::SelectOp::create(b_, has, col, constant(i64, 0));
    for (int64_t s = 0; s < steps; ++s)
      for (int64_t half = 0; half < 2; ++half) {
        mlir::Value at = arith::AddIOp::create(
            b_, arith::MulIOp::create(b_, row, constant(i64, kRowK)),
            arith::AddIOp::create(b_, k4, constant(i64, s * kMmaK + half * 16)));
        mlir::Value w = arith::SelectOp::create(b_, has, loadWord(b_, stagedBytes, toIndex(at)),
                                                constant(i32, 0));
        out = vector::InsertOp::create(b_, w, out, ArrayRef<int64_t>{(nt * steps + s) * 2 + half});
      }
  }
  return out;
}

// a (16 tokens x 128, blocked: lane l holds row l / 2, K [64 (l % 2), +64)) goes through the
// padded staging buffer into the A layout; 4 K steps x (1 or 2) column tiles of mma.sync; the
// accumulators go through the result buffer to the result tile's owners.
mlir::Value Emitter::mmaDotTiles(const dsl::Op &op) {
  mlir::Type i64 = b_.getI64Type(), f32 = b_.getF32Type(), i8 = b_.getI8Type();
  const int32_t opIndex = static_cast<int32_t>(&op - k_.ops.data());
  const dsl::ValueId bId = op.operands[1];
  if (!dotStage_.count(bId.id))
    stageDotOperand(bId, /*barrierBefore=*/true);
  const int64_t N = k_.typeOf(bId).lanes / kRowK, tiles = (N + kMmaN - 1) / kMmaN;
  const int64_t steps = kRowK / kMmaK, perLane = kMmaM * kRowK / threads_;
  mlir::Value stageA = dotAStage_.at(opIndex), res = dotResult_.at(opIndex);
  mlir::Value lane = laneI64();
  // Stage: 16-byte stores of this lane's part of its row.
  mlir::Value a = arith::BitcastOp::create(b_, VectorType::get({perLane}, i8), get(op.operands[0]));
  mlir::Value base = arith::AddIOp::create(
      b_, arith::MulIOp::create(b_, arith::DivSIOp::create(b_, lane, constant(i64, kRowK / perLane)),
                                constant(i64, kMmaRowBytes)),
      arith::MulIOp::create(b_, arith::RemSIOp::create(b_, lane, constant(i64, kRowK / perLane)),
                            constant(i64, perLane)));
  for (int64_t c = 0; c < perLane; c += 16) {
    mlir::Value part = vector::ExtractStridedSliceOp::create(b_, a, ArrayRef<int64_t>{c},
                                                             ArrayRef<int64_t>{16}, ArrayRef<int64_t>{1});
    vector::StoreOp::create(b_, part, stageA,
                            ValueRange{toIndex(arith::AddIOp::create(b_, base, constant(i64, c)))},
                            false, llvm::MaybeAlign(16));
  }
  barrier();
  mlir::Value g = arith::DivSIOp::create(b_, lane, constant(i64, 4));
  mlir::Value t = arith::RemSIOp::create(b_, lane, constant(i64, 4));
  mlir::Value aBase = arith::AddIOp::create(b_, arith::MulIOp::create(b_, g, constant(i64, kMmaRowBytes)),
                                            arith::MulIOp::create(b_, t, constant(i64, 4)));
  std::vector<mlir::Value> aRegs; // [step][a0..a3]
  for (int64_t s = 0; s < steps; ++s)
    for (auto [row, k] : {std::pair{0, 0}, std::pair{8, 0}, std::pair{0, 16}, std::pair{8, 16}})
      aRegs.push_back(loadWord(b_, stageA, toIndex(arith::AddIOp::create(
                                               b_, aBase, constant(i64, row * kMmaRowBytes + s * kMmaK + k)))));
  mlir::Value bRegs = mfmaB_.at(bId.id);
  auto accType = LLVM::LLVMStructType::getLiteral(b_.getContext(), {f32, f32, f32, f32});
  for (int64_t nt = 0; nt < tiles; ++nt) {
    std::vector<mlir::Value> c(4, constant(f32, 0));
    for (int64_t s = 0; s < steps; ++s) {
      SmallVector<mlir::Value> args(aRegs.begin() + s * 4, aRegs.begin() + s * 4 + 4);
      for (int64_t half = 0; half < 2; ++half)
        args.push_back(vector::ExtractOp::create(b_, bRegs, ArrayRef<int64_t>{(nt * steps + s) * 2 + half}));
      args.append(c.begin(), c.end());
      mlir::Value d = LLVM::CallIntrinsicOp::create(b_, accType, b_.getStringAttr(kMmaIntrinsic), args)
                          .getResult(0);
      for (int64_t i = 0; i < 4; ++i)
        c[i] = LLVM::ExtractValueOp::create(b_, d, ArrayRef<int64_t>{i});
    }
    // c[i] is token g + 8 (i / 2) against column 8 nt + 2 t + i % 2: written where that column exists.
    for (int64_t i = 0; i < 4; ++i) {
      mlir::Value col = arith::AddIOp::create(b_, arith::MulIOp::create(b_, t, constant(i64, 2)),
                                              constant(i64, nt * kMmaN + i % 2));
      mlir::Value m = arith::AddIOp::create(b_, g, constant(i64, 8 * (i / 2)));
      auto exists = scf::IfOp::create(
          b_, TypeRange{}, arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, col, constant(i64, N)), false);
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPoint(exists.thenBlock()->getTerminator());
      mlir::Value at = arith::AddIOp::create(b_, arith::MulIOp::create(b_, col, constant(i64, kMmaM)), m);
      memref::StoreOp::create(b_, c[i], res, ValueRange{toIndex(at)});
    }
  }
  barrier();
  mlir::Value out = gpuLoadTile(res, constant(i64, 0), N * kMmaM, f32);
  barrier(); // both buffers are written again by the next tile
  return out;
}

} // namespace m3idx::lowering
