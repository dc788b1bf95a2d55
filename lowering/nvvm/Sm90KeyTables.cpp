// sm_90's NVFP4 decode (Sm90KeyTables, nvvm/Sm90Program.h): per-scale key tables built once per
// program in shared memory (rounded by cvt.rn.satfinite.e4m3x2.f16x2) and looked up with prmt,
// and the exact f32 keys in constant memory for decodes widened to f32.
#include <array>

#include "core/Nvfp4.h"
#include "lowering/nvvm/Sm90Program.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace m3idx::lowering {

using namespace mlir;

// SPEC §2 through byte permutes. Per scale s, the key bytes of the 8 positive E2M1 codes (0, 0.5,
// 1, 1.5, 2, 3, 4, 6) times s: those products are exact in f16 (at most 6 significant bits,
// between 2^-10 and 2688), so cvt.rn.satfinite.e4m3x2.f16x2 is the only rounding (to nearest
// even, |x| > 448 to +-448, NaN to 0x7F), as in SPEC's fp32 formulation.
std::pair<mlir::Value, mlir::Value> Sm90KeyTables::sm90KeyWordsOf(mlir::Value scaleByte) {
  mlir::Type i16 = b_.getI16Type(), i32 = b_.getI32Type();
  auto h2 = VectorType::get({2}, b_.getF16Type());
  mlir::Value two = vector::BroadcastOp::create(b_, VectorType::get({2}, b_.getI8Type()), scaleByte);
  mlir::Value sc = NVVM::ConvertF8x2ToF16x2Op::create(b_, h2, two, b_.getBoolAttr(false),
                                                      TypeAttr::get(b_.getType<Float8E4M3FNType>()));
  const double mags[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  mlir::Value pair[4];
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
  mlir::Value sixteen = constant(b_, i32, 16);
  return {arith::OrIOp::create(b_, pair[0], arith::ShLIOp::create(b_, pair[1], sixteen)),
          arith::OrIOp::create(b_, pair[2], arith::ShLIOp::create(b_, pair[3], sixteen))};
}

// The table of all 256 scales, 2 KB of shared memory, once per program: a decode then loads its
// scale group's two words (one ld.shared.v2) instead of computing them, which cost a sixth of the
// score loop when done per tile.
void Sm90KeyTables::sm90FillKeyWords() {
  auto loop = scf::ForOp::create(b_, e_.gpu().lane(), arith::ConstantIndexOp::create(b_, 256),
                                 arith::ConstantIndexOp::create(b_, threads_));
  {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(loop.getBody());
    mlir::Value s = loop.getInductionVar();
    auto [lo, hi] = sm90KeyWordsOf(
        arith::TruncIOp::create(b_, b_.getI8Type(), arith::IndexCastOp::create(b_, b_.getI32Type(), s)));
    mlir::Value words = vector::FromElementsOp::create(b_, VectorType::get({2}, b_.getI32Type()),
                                                       ValueRange{lo, hi});
    vector::StoreOp::create(b_, words, state_.keyWords,
                            ValueRange{arith::MulIOp::create(b_, s, arith::ConstantIndexOp::create(b_, 2))},
                            false, llvm::MaybeAlign(8));
  }
  e_.gpu().barrier();
}

// The fill is emitted at the first point that needs the table (a staging, else a decode) and dominates
// every later use inside that block's region: a use outside it (not in m3idx's kernels) fills again.
// Never inside a loop: each trip would write the table again while the program's other warps may
// still read the last trip's (a race compute-sanitizer's racecheck reports, in decode_keys, whose
// first need is the decode in its loop): before the outermost loop around that point instead.
void Sm90KeyTables::sm90KeyWordsReady() {
  mlir::Block *here = b_.getInsertionBlock();
  for (mlir::Block *at = here; at; at = at->getParentOp() ? at->getParentOp()->getBlock() : nullptr)
    if (at == state_.keyWordsFilledIn)
      return;
  mlir::Operation *outerLoop = nullptr;
  for (mlir::Block *at = here; at && at->getParentOp(); at = at->getParentOp()->getBlock())
    if (isa<scf::ForOp>(at->getParentOp()))
      outerLoop = at->getParentOp();
  if (!outerLoop) {
    sm90FillKeyWords();
    state_.keyWordsFilledIn = here;
    return;
  }
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPoint(outerLoop);
  sm90FillKeyWords();
  state_.keyWordsFilledIn = outerLoop->getBlock();
}

// Then one prmt looks up 4 elements at once (the packed nibbles, sign bits masked, are its
// selectors), and the nibbles' signs are XORed into bit 7: a second prmt in sign-replicate mode
// spreads them to whole bytes (an even element's sign is bit 7 of its packed byte shifted left by
// 4, an odd one's bit 7 of the byte itself). The table carries the scale's sign and rounding is
// symmetric; a NaN scale gives 0x7F or 0xFF, both NaN, and a NaN dot is dropped from the max
// either way.
mlir::Value Sm90KeyTables::sm90DecodeNvfp4(mlir::Value packed, mlir::Value scales) {
  const int64_t P = cast<VectorType>(packed.getType()).getNumElements(), N = 2 * P;
  mlir::Type i32 = b_.getI32Type();
  if (P % 4 != 0 || !state_.keyWords) {
    e_.fail(!state_.keyWords ? std::string("nvfp4.decode: no sm_90 key table in this program")
                          : fmt::format("nvfp4.decode: {} packed bytes per thread is not whole words", P));
    return constant(b_, VectorType::get({N}, b_.getType<Float8E4M3FNType>()), 0);
  }
  auto c32 = [&](uint32_t v) { return constant(b_, i32, static_cast<double>(static_cast<int32_t>(v))); };
  auto prmt = [&](mlir::Value lo, mlir::Value hi, mlir::Value sel) {
    return NVVM::PermuteOp::create(b_, i32, lo, hi, sel, NVVM::PermuteMode::DEFAULT).getResult();
  };
  sm90KeyWordsReady();
  mlir::Value scaleBytes = e_.gpu().threadScales(scales, e_.decodeScaleLanes(), N);
  const int64_t S = cast<VectorType>(scaleBytes.getType()).getNumElements();
  std::vector<std::pair<mlir::Value, mlir::Value>> tables; // per group: key bytes of codes 0-3, 4-7
  for (int64_t g = 0; g < S; ++g) {
    mlir::Value at = arith::ShLIOp::create(
        b_,
        arith::IndexCastUIOp::create(b_, b_.getIndexType(),
                                     vector::ExtractOp::create(b_, scaleBytes, ArrayRef<int64_t>{g})),
        arith::ConstantIndexOp::create(b_, 1));
    mlir::Value two = vector::LoadOp::create(b_, VectorType::get({2}, i32), state_.keyWords, ValueRange{at}, false,
                                             llvm::MaybeAlign(8));
    tables.push_back({vector::ExtractOp::create(b_, two, ArrayRef<int64_t>{0}),
                      vector::ExtractOp::create(b_, two, ArrayRef<int64_t>{1})});
  }
  const int64_t W = P / 4;
  mlir::Value words = vector::BitCastOp::create(b_, VectorType::get({W}, i32), packed);
  mlir::Value out = constant(b_, VectorType::get({2 * W}, i32), 0);
  for (int64_t w = 0; w < W; ++w) { // 8 elements of one scale group
    mlir::Value x = vector::ExtractOp::create(b_, words, ArrayRef<int64_t>{w});
    auto [lo, hi] = tables[S == 1 ? 0 : (8 * w) / 16];
    mlir::Value codes = arith::AndIOp::create(b_, x, c32(0x77777777));
    mlir::Value evenSigns = arith::ShLIOp::create(b_, x, c32(4));
    for (int half = 0; half < 2; ++half) { // elements 4 half .. 4 half + 3
      mlir::Value sel = half ? mlir::Value(arith::ShRUIOp::create(b_, codes, c32(16))) : codes;
      mlir::Value mag = prmt(lo, hi, sel);
      // Byte j: element 4 half + j's sign replicated, from byte (4 half + j) / 2 of x << 4 (even
      // j: selector 8 | byte) or of x (odd j: 8 | 4 + byte).
      mlir::Value sign = prmt(evenSigns, x, c32(half ? 0xFBEA : 0xD9C8));
      out = vector::InsertOp::create(
          b_, arith::XOrIOp::create(b_, mag, arith::AndIOp::create(b_, sign, c32(0x80808080))), out,
          ArrayRef<int64_t>{2 * w + half});
    }
  }
  mlir::Value bytes = vector::BitCastOp::create(b_, VectorType::get({N}, b_.getI8Type()), out);
  return arith::BitcastOp::create(b_, VectorType::get({N}, b_.getType<Float8E4M3FNType>()), bytes);
}

// The f32 key table (constant memory), for decodes widened to f32.
void Sm90KeyTables::declareGlobals(Block *moduleBody, bool keysAsF32) {
  if (!keysAsF32)
    return;
  // Entry [scale * 16 + nibble] = E4M3 value of e4m3_rn_satfinite(E2M1(nibble) * E4M3(scale)).
  std::vector<float> table(16 * 256);
  for (int sc = 0; sc < 256; ++sc)
    for (int n = 0; n < 16; ++n)
      table[sc * 16 + n] = nvfp4::e4m3Table()[nvfp4::keyByteTable()[n][sc]];
  auto type = MemRefType::get({16 * 256}, b_.getF32Type());
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(moduleBody);
  memref::GlobalOp::create(b_, "m3idx_nvfp4_keys", b_.getStringAttr("private"), type,
                           DenseElementsAttr::get(RankedTensorType::get({16 * 256}, b_.getF32Type()),
                                                  ArrayRef<float>(table)),
                           /*constant=*/true, /*alignment=*/IntegerAttr());
}

// extf(nvfp4.decode(p, s)) as one lookup per element in the table of the 16 x 256 exact key
// values (core/Nvfp4), instead of the decode's arithmetic and the widening's ({} without the table:
// no decode of the program is widened to f32).
mlir::Value Sm90KeyTables::keysF32(tile::DecodeNvfp4Op decode) {
  if (!state_.keyTable)
    return {};
  mlir::Value packed = e_.get(decode.getPacked()), scales = e_.get(decode.getScales());
  const int64_t kp = cast<VectorType>(packed.getType()).getNumElements(), ko = 2 * kp;
  mlir::Type i32 = b_.getI32Type();
  mlir::Value scaleBytes =
      e_.gpu().threadScales(scales, cast<ShapedType>(decode.getScales().getType()).getNumElements(), ko);
  const int64_t S = cast<VectorType>(scaleBytes.getType()).getNumElements();
  std::vector<mlir::Value> rows; // table row of each scale: scale * 16
  for (int64_t g = 0; g < S; ++g)
    rows.push_back(arith::MulIOp::create(
        b_, arith::ExtUIOp::create(b_, i32, vector::ExtractOp::create(b_, scaleBytes, ArrayRef<int64_t>{g})),
        constant(b_, i32, 16)));
  mlir::Value out = constant(b_, VectorType::get({ko}, b_.getF32Type()), 0);
  for (int64_t j = 0; j < ko; ++j) {
    mlir::Value byte = arith::ExtUIOp::create(
        b_, i32, vector::ExtractOp::create(b_, packed, ArrayRef<int64_t>{j / 2}));
    mlir::Value nibble = arith::AndIOp::create(
        b_, j % 2 ? mlir::Value(arith::ShRUIOp::create(b_, byte, constant(b_, i32, 4))) : byte,
        constant(b_, i32, 15));
    mlir::Value idx = arith::IndexCastOp::create(
        b_, b_.getIndexType(), arith::AddIOp::create(b_, rows[S == 1 ? 0 : j / 16], nibble));
    mlir::Value v = memref::LoadOp::create(b_, state_.keyTable, ValueRange{idx});
    out = vector::InsertOp::create(b_, v, out, ArrayRef<int64_t>{j});
  }
  return out;
}

} // namespace m3idx::lowering
