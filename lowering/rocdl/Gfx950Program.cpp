// One kernel's gfx950 emitting (Gfx950Program.h): the NVFP4 decode through the CDNA4
// conversion instructions and dot.tiles on the f8f6f4 matrix cores, both reached through MLIR's
// amdgpu dialect (convert-amdgpu-to-rocdl picks the instructions).
//
// MFMA 16x16x128 (f8): lane l holds A row l % 16, K [32 * (l / 16), +32) as 32 bytes, B the same
// with column l % 16, and D rows 4 * (l / 16) + i, column l % 16 in register i (the CDNA4 ISA's
// layout for this instruction, as IREE's MFMA_F32_16x16x128_F8E4M3FN intrinsic describes it).
// Not run on an MI355X: no AMD GPU is available to this project.
#include <limits>

#include "core/Spec.h"
#include "lowering/rocdl/Gfx950Program.h"
#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace m3idx::lowering {

using namespace mlir;

namespace {
constexpr int64_t kMfmaM = 16, kMfmaK = 128, kMfmaLanes = 64, kFragBytes = 32;
} // namespace

// SPEC §2 per pair of nibbles: v_cvt_scalef32_pk_f32_fp4 with scale 1.0 (these instructions use
// only the scale's exponent, so the E4M3 scale cannot go in there), an f32 multiply by the
// scale (exact: 2 x 4 significant bits), a clamp to +-448 that keeps NaN (minimumf/maximumf),
// then v_cvt_pk_fp8_f32 (round to nearest even; it does not saturate, hence the clamp).
mlir::Value Gfx950Program::decodeNvfp4(mlir::Value packed, mlir::Value scales) {
  const int64_t P = cast<VectorType>(packed.getType()).getNumElements(), N = 2 * P;
  mlir::Type f32 = b_.getF32Type(), f8 = b_.getType<Float8E4M3FNType>();
  mlir::Value scaleBytes = e_.gpu().threadScales(scales, e_.decodeScaleLanes(), N);
  const int64_t S = cast<VectorType>(scaleBytes.getType()).getNumElements();
  mlir::Value scaleF8 = arith::BitcastOp::create(b_, VectorType::get({S}, f8), scaleBytes);
  std::vector<mlir::Value> scaleF;
  for (int64_t g = 0; g < S; ++g) // v_cvt_f32_fp8: E4M3 to f32 is exact
    scaleF.push_back(amdgpu::ExtPackedFp8Op::create(
        b_, f32, vector::ExtractStridedSliceOp::create(b_, scaleF8, ArrayRef<int64_t>{g},
                                                       ArrayRef<int64_t>{1}, ArrayRef<int64_t>{1}),
        b_.getI32IntegerAttr(0)));
  mlir::Value one = constant(b_, f32, 1.0);
  auto v2 = VectorType::get({2}, f32), v4f8 = VectorType::get({4}, f8);
  mlir::Value hi = constant(b_, v2, 448.0), lo = constant(b_, v2, -448.0);
  mlir::Value out = constant(b_, VectorType::get({N}, f8), 0);
  for (int64_t w = 0; w < P; w += 4) { // 4 packed bytes = 8 elements = 2 output words
    const int64_t take = std::min<int64_t>(4, P - w);
    mlir::Value bytes = vector::ExtractStridedSliceOp::create(
        b_, packed, ArrayRef<int64_t>{w}, ArrayRef<int64_t>{take}, ArrayRef<int64_t>{1});
    mlir::Value fp4 = vector::BitCastOp::create(
        b_, VectorType::get({2 * take}, b_.getType<Float4E2M1FNType>()), bytes);
    mlir::Value word;
    for (int64_t j = 0; j < take; ++j) { // byte j: elements 2(w + j) (low nibble) and + 1
      mlir::Value pair = amdgpu::ScaledExtPackedOp::create(b_, v2, fp4, one, b_.getI32IntegerAttr(j));
      const int64_t element = 2 * (w + j);
      mlir::Value sc = vector::BroadcastOp::create(b_, v2, scaleF[S == 1 ? 0 : element / 16]);
      mlir::Value x = arith::MaximumFOp::create(
          b_, arith::MinimumFOp::create(b_, arith::MulFOp::create(b_, pair, sc), hi), lo);
      mlir::Value x0 = vector::ExtractOp::create(b_, x, ArrayRef<int64_t>{0});
      mlir::Value x1 = vector::ExtractOp::create(b_, x, ArrayRef<int64_t>{1});
      word = amdgpu::PackedTrunc2xFp8Op::create(b_, v4f8, x0, x1, b_.getI32IntegerAttr(j % 2),
                                                j % 2 ? word : mlir::Value());
      if (j % 2 == 1 || j == take - 1) {
        const int64_t n = j % 2 ? 4 : 2; // a lone last byte fills half a word
        mlir::Value part = n == 4 ? word
                                  : mlir::Value(vector::ExtractStridedSliceOp::create(
                                        b_, word, ArrayRef<int64_t>{0}, ArrayRef<int64_t>{2},
                                        ArrayRef<int64_t>{1}));
        out = vector::InsertStridedSliceOp::create(b_, part, out,
                                                   ArrayRef<int64_t>{2 * (w + j - j % 2)},
                                                   ArrayRef<int64_t>{1});
      }
    }
  }
  return out;
}

bool Gfx950Program::fits(tile::DotTilesOp op) const {
  auto a = cast<ShapedType>(op.getLhs().getType());
  const int64_t bLanes = cast<ShapedType>(op.getRhs().getType()).getNumElements();
  return e_.threads() == kMfmaLanes && isa<Float8E4M3FNType>(a.getElementType()) &&
         static_cast<int64_t>(op.getK()) == kMfmaK && a.getNumElements() == kMfmaM * kMfmaK && bLanes % kMfmaK == 0 &&
         bLanes / kMfmaK <= 16;
}

void Gfx950Program::stageMatrixB(mlir::Value b, mlir::Value staged, int64_t rows) {
  fragmentsB_[b] = fragmentB(staged, rows, spec::kIndexHeadDim);
}

// Lane l's B fragment: 32 bytes of row l % 16 of the staged b (zeros for rows b does not have).
mlir::Value Gfx950Program::fragmentB(mlir::Value stagedBytes, int64_t rows, int64_t k) {
  mlir::Type i64 = b_.getI64Type();
  auto frag = VectorType::get({kFragBytes}, b_.getI8Type());
  mlir::Value lane = e_.gpu().laneI64();
  mlir::Value col = arith::RemSIOp::create(b_, lane, constant(b_, i64, 16));
  mlir::Value kb = arith::MulIOp::create(b_, arith::DivSIOp::create(b_, lane, constant(b_, i64, 16)),
                                         constant(b_, i64, kFragBytes));
  mlir::Value has = arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, col, constant(b_, i64, rows));
  mlir::Value row = arith::SelectOp::create(b_, has, col, constant(b_, i64, 0));
  mlir::Value at = arith::AddIOp::create(b_, arith::MulIOp::create(b_, row, constant(b_, i64, k)), kb);
  mlir::Value v = vector::LoadOp::create(b_, frag, stagedBytes, ValueRange{toIndex(b_, at)});
  v = arith::SelectOp::create(b_, has, v, constant(b_, frag, 0));
  return arith::BitcastOp::create(b_, VectorType::get({kFragBytes}, b_.getType<Float8E4M3FNType>()), v);
}

// a (16 tokens x 128, blocked: thread t holds row t / 4, K [32 (t % 4), +32)) is permuted into
// the A layout with 8 dword shuffles, one MFMA runs, and each result lane n * 16 + m is fetched
// from D's owner (lane 16 (m / 4) + n, register m % 4).
mlir::Value Gfx950Program::dotTiles(tile::DotTilesOp op) {
  mlir::Type i32 = b_.getI32Type(), i64 = b_.getI64Type(), f32 = b_.getF32Type();
  const mlir::Value bId = op.getRhs();
  if (!e_.stagedDotOperands().count(bId))
    e_.stageDotOperand(bId, e_.get(bId), /*barrierBefore=*/true);
  const int64_t N = cast<ShapedType>(bId.getType()).getNumElements() / kMfmaK;
  mlir::Value lane = e_.gpu().laneI64();
  mlir::Value words = vector::BitCastOp::create(
      b_, VectorType::get({kFragBytes / 4}, i32),
      arith::BitcastOp::create(b_, VectorType::get({kFragBytes}, b_.getI8Type()), e_.get(op.getLhs())));
  mlir::Value src = arith::AddIOp::create(
      b_, arith::MulIOp::create(b_, arith::RemSIOp::create(b_, lane, constant(b_, i64, 16)), constant(b_, i64, 4)),
      arith::DivSIOp::create(b_, lane, constant(b_, i64, 16)));
  mlir::Value aWords = constant(b_, VectorType::get({kFragBytes / 4}, i32), 0);
  for (int64_t d = 0; d < kFragBytes / 4; ++d)
    aWords = vector::InsertOp::create(
        b_, e_.gpu().shuffleIdx(vector::ExtractOp::create(b_, words, ArrayRef<int64_t>{d}), src), aWords,
        ArrayRef<int64_t>{d});
  mlir::Value aFrag = arith::BitcastOp::create(
      b_, VectorType::get({kFragBytes}, b_.getType<Float8E4M3FNType>()),
      vector::BitCastOp::create(b_, VectorType::get({kFragBytes}, b_.getI8Type()), aWords));
  auto acc = VectorType::get({4}, f32);
  mlir::Value d = amdgpu::MFMAOp::create(b_, acc, kMfmaM, 16, kMfmaK, 1, aFrag, fragmentsB_.lookup(bId),
                                         constant(b_, acc, 0));
  const int64_t lanesOut = N * kMfmaM, cr = e_.gpu().chunk(lanesOut);
  mlir::Value out = constant(b_, VectorType::get({cr}, f32), 0);
  for (int64_t j = 0; j < cr; ++j) {
    mlir::Value idx = arith::AddIOp::create(b_, arith::MulIOp::create(b_, lane, constant(b_, i64, cr)),
                                            constant(b_, i64, j));
    if (e_.gpu().partial(lanesOut)) // threads past the tile fetch from lane 0: in range, unused
      idx = arith::SelectOp::create(b_, e_.gpu().laneBelow(lanesOut), idx, constant(b_, i64, 0));
    mlir::Value n = arith::DivSIOp::create(b_, idx, constant(b_, i64, kMfmaM));
    mlir::Value m = arith::RemSIOp::create(b_, idx, constant(b_, i64, kMfmaM));
    mlir::Value from = arith::AddIOp::create(
        b_, arith::MulIOp::create(b_, arith::DivSIOp::create(b_, m, constant(b_, i64, 4)), constant(b_, i64, 16)), n);
    mlir::Value v;
    if (cr % 4 == 0) { // every thread wants register j % 4
      v = e_.gpu().shuffleIdx(vector::ExtractOp::create(b_, d, ArrayRef<int64_t>{j % 4}), from);
    } else {
      mlir::Value reg = arith::RemSIOp::create(b_, m, constant(b_, i64, 4));
      for (int64_t i = 0; i < 4; ++i) {
        mlir::Value vi = e_.gpu().shuffleIdx(vector::ExtractOp::create(b_, d, ArrayRef<int64_t>{i}), from);
        v = i == 0 ? vi
                   : mlir::Value(arith::SelectOp::create(
                         b_, arith::CmpIOp::create(b_, arith::CmpIPredicate::eq, reg, constant(b_, i64, i)),
                         vi, v));
      }
    }
    out = vector::InsertOp::create(b_, v, out, ArrayRef<int64_t>{j});
  }
  return out;
}

} // namespace m3idx::lowering
