// The sm_90 parts of the DSL's GPU form (see EmitterImpl.h): the NVFP4 decode in f16x2 rounded by
// cvt.rn.satfinite.e4m3x2.f16x2, and dot.tiles on the tensor cores as mma.sync m16n8k32 e4m3.
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

// SPEC §2 per packed byte, in f16x2: a nibble's bits s.eem placed as f16 bits (eem << 9, s << 15)
// are its E2M1 value times 2^-14 (exact, subnormal for eem < 2); times 2^14 it is the value. An
// E2M1 value (2 significant bits, at most 6) times an E4M3 scale (4 bits, 2^-9 to 448) has at most
// 6 significant bits between 2^-10 and 2688, so both f16 multiplies are exact and
// cvt.rn.satfinite.e4m3x2.f16x2 is the only rounding (to nearest even, |x| > 448 to +-448, NaN to
// 0x7F), as SPEC's fp32 formulation rounds once.
mlir::Value Emitter::sm90DecodeNvfp4(mlir::Value packed, mlir::Value scales) {
  const int64_t P = cast<VectorType>(packed.getType()).getNumElements(), N = 2 * P;
  mlir::Type i16 = b_.getI16Type(), i32 = b_.getI32Type(), f16 = b_.getF16Type();
  auto h2 = VectorType::get({2}, f16);
  mlir::Value scaleBytes = gpuThreadScales(scales, N);
  const int64_t S = cast<VectorType>(scaleBytes.getType()).getNumElements();
  mlir::Value scaleF = arith::ExtFOp::create(
      b_, VectorType::get({S}, b_.getF32Type()),
      arith::BitcastOp::create(b_, VectorType::get({S}, b_.getType<Float8E4M3FNType>()), scaleBytes)
          .getResult());
  std::vector<mlir::Value> scaleH2; // per group of 16: (scale, scale) in f16, exact
  for (int64_t g = 0; g < S; ++g)
    scaleH2.push_back(vector::BroadcastOp::create(
        b_, h2,
        arith::TruncFOp::create(b_, f16, vector::ExtractOp::create(b_, scaleF, ArrayRef<int64_t>{g}))));
  mlir::Value pow14 = constant(h2, 16384.0);
  auto field = [&](mlir::Value byte, int64_t mask, int64_t shift) {
    return arith::ShLIOp::create(b_, arith::AndIOp::create(b_, byte, constant(i32, static_cast<double>(mask))),
                                 constant(i32, static_cast<double>(shift)));
  };
  mlir::Value pairs = constant(VectorType::get({P}, i16), 0);
  for (int64_t j = 0; j < P; ++j) {
    mlir::Value byte = arith::ExtUIOp::create(b_, i32, vector::ExtractOp::create(b_, packed, ArrayRef<int64_t>{j}));
    // f16 lane 0 (the register's low half): the low nibble, element 2j; lane 1: the high one.
    // cvt...e4m3x2.f16x2 keeps halves in place (low half to the low byte), whatever MLIR's op
    // description says about its "first element".
    mlir::Value bits = arith::OrIOp::create(
        b_, arith::OrIOp::create(b_, field(byte, 0x7, 9), field(byte, 0x8, 12)),
        arith::OrIOp::create(b_, field(byte, 0x70, 21), field(byte, 0x80, 24)));
    mlir::Value x = vector::BitCastOp::create(
        b_, h2, vector::BroadcastOp::create(b_, VectorType::get({1}, i32), bits));
    x = arith::MulFOp::create(b_, arith::MulFOp::create(b_, x, pow14), scaleH2[S == 1 ? 0 : (2 * j) / 16]);
    mlir::Value pair = NVVM::ConvertF16x2ToF8x2Op::create(b_, i16, x, false, b_.getType<Float8E4M3FNType>());
    pairs = vector::InsertOp::create(b_, pair, pairs, ArrayRef<int64_t>{j});
  }
  mlir::Value bytes = vector::BitCastOp::create(b_, VectorType::get({N}, b_.getI8Type()), pairs);
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
  gpu::BarrierOp::create(b_);
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
  gpu::BarrierOp::create(b_);
  mlir::Value out = gpuLoadTile(res, constant(i64, 0), N * kMmaM, f32);
  gpu::BarrierOp::create(b_); // both buffers are written again by the next tile
  return out;
}

} // namespace m3idx::lowering
