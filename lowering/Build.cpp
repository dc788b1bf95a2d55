#include "lowering/Build.h"

#include <limits>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "tile/FromDsl.h"

namespace m3idx::lowering {

using namespace mlir;

mlir::Value constant(ImplicitLocOpBuilder &b, mlir::Type t, double v) {
  mlir::Type e = getElementTypeOrSelf(t);
  TypedAttr scalarAttr = isa<FloatType>(e) ? TypedAttr(b.getFloatAttr(e, v))
                                           : TypedAttr(b.getIntegerAttr(e, static_cast<int64_t>(v)));
  if (auto vt = dyn_cast<VectorType>(t))
    return arith::ConstantOp::create(b, DenseElementsAttr::get(vt, scalarAttr));
  return arith::ConstantOp::create(b, scalarAttr);
}

mlir::Value toIndex(ImplicitLocOpBuilder &b, mlir::Value v) {
  if (std::optional<int64_t> c = mlir::getConstantIntValue(v))
    return arith::ConstantIndexOp::create(b, *c);
  return arith::IndexCastOp::create(b, b.getIndexType(), v);
}

mlir::Value toF32(ImplicitLocOpBuilder &b, mlir::Value v) {
  mlir::Type t = v.getType();
  if (getElementTypeOrSelf(t).isF32())
    return v;
  auto vt = dyn_cast<VectorType>(t);
  return arith::ExtFOp::create(b, vt ? mlir::Type(vt.clone(b.getF32Type())) : b.getF32Type(), v);
}

mlir::Type elemType(mlir::OpBuilder &b, dsl::Elem e) { return tile::elemType(b.getContext(), e); }

namespace {

// " (at kernels_src/Nvfp4Score.cpp:LINE)": the file as the build named it, from its folder on.
std::string sourceAt(std::string_view file, unsigned line) {
  size_t cut = file.rfind('/');
  if (cut != std::string_view::npos && cut > 0)
    cut = file.rfind('/', cut - 1);
  return fmt::format(" (at {}:{})", cut == std::string_view::npos ? file : file.substr(cut + 1), line);
}

} // namespace

std::string sourceOf(const dsl::Op &op) { return op.loc.known() ? sourceAt(op.loc.file, op.loc.line) : ""; }

std::string sourceOf(mlir::Location loc) {
  auto at = dyn_cast<FileLineColLoc>(loc);
  return at ? sourceAt(at.getFilename().strref(), at.getLine()) : "";
}

mlir::Location locOf(mlir::OpBuilder &b_, const dsl::Op &op) {
  if (!op.loc.known())
    return b_.getUnknownLoc();
  return mlir::FileLineColLoc::get(b_.getContext(), op.loc.file, op.loc.line, op.loc.column);
}

// SPEC §2 key rule in target-neutral arith: E2M1 and E4M3 widen exactly to f32, the product is
// exact, the clamp to +-448 keeps NaN (maximumf/minimumf propagate it), and truncf rounds to
// nearest even. Each target legalizes the small-float extf/truncf its own way.
mlir::Value decodeNvfp4Exact(ImplicitLocOpBuilder &b_, mlir::Value packed, mlir::Value scaleBytes) {
  auto pt = cast<VectorType>(packed.getType());
  const int64_t P = pt.getNumElements(), N = 2 * P;
  mlir::Value lo = arith::AndIOp::create(b_, packed, constant(b_, pt, 15));
  mlir::Value hi = arith::ShRUIOp::create(b_, packed, constant(b_, pt, 4));
  SmallVector<int64_t> interleave;
  for (int64_t i = 0; i < P; ++i)
    interleave.append({i, P + i});
  mlir::Value nibbles = vector::ShuffleOp::create(b_, lo, hi, interleave);
  auto i4 = VectorType::get({N}, b_.getIntegerType(4));
  auto f4 = VectorType::get({N}, b_.getType<Float4E2M1FNType>());
  auto f32N = VectorType::get({N}, b_.getF32Type());
  mlir::Value e2m1 = arith::BitcastOp::create(b_, f4, arith::TruncIOp::create(b_, i4, nibbles));
  mlir::Value values = arith::ExtFOp::create(b_, f32N, e2m1);

  // One E4M3 scale per 16 elements.
  const int64_t S = cast<VectorType>(scaleBytes.getType()).getNumElements();
  mlir::Value scaleF = arith::ExtFOp::create(
      b_, VectorType::get({S}, b_.getF32Type()),
      arith::BitcastOp::create(b_, VectorType::get({S}, b_.getType<Float8E4M3FNType>()), scaleBytes)
          .getResult());
  SmallVector<int64_t> perElement;
  for (int64_t d = 0; d < N; ++d)
    perElement.push_back(S == 1 ? 0 : d / 16);
  mlir::Value scaleN = vector::ShuffleOp::create(b_, scaleF, scaleF, perElement);
  mlir::Value prod = arith::MulFOp::create(b_, values, scaleN);
  mlir::Value clamped = arith::MaximumFOp::create(
      b_, arith::MinimumFOp::create(b_, prod, constant(b_, f32N, 448.0)), constant(b_, f32N, -448.0));
  return arith::TruncFOp::create(b_, VectorType::get({N}, b_.getType<Float8E4M3FNType>()),
                                 clamped);
}

mlir::Value packScoreKey(ImplicitLocOpBuilder &b_, mlir::Value s, mlir::Value block) {
  // Scalars or vectors of one shape: each constant takes the shape of the value it meets.
  mlir::Type f32 = s.getType(), i64 = block.getType(), i32 = b_.getI32Type();
  if (auto v = dyn_cast<VectorType>(f32))
    i32 = v.clone(i32);
  // NaN -> -inf, and -0 -> +0 by adding +0 (exact for every other score: no target flushes
  // denormals). Then the ordered bits: a negative score's bits all flipped, another's sign bit
  // set, as u ^ ((u >> 31, arithmetic) | sign). Six instructions a key where compares and selects
  // took eight (topk_prefill packs every score it reads).
  mlir::Value isNaN = arith::CmpFOp::create(b_, arith::CmpFPredicate::UNO, s, s);
  s = arith::SelectOp::create(b_, isNaN, constant(b_, f32, -std::numeric_limits<double>::infinity()), s);
  s = arith::AddFOp::create(b_, s, constant(b_, f32, 0.0));
  mlir::Value u = arith::BitcastOp::create(b_, i32, s);
  mlir::Value ord = arith::XOrIOp::create(
      b_, u,
      arith::OrIOp::create(b_, arith::ShRSIOp::create(b_, u, constant(b_, i32, 31)),
                           constant(b_, i32, static_cast<double>(INT32_MIN))));
  mlir::Value high = arith::ShLIOp::create(b_, arith::ExtUIOp::create(b_, i64, ord), constant(b_, i64, 32));
  return arith::OrIOp::create(b_, high, arith::AndIOp::create(b_, block, constant(b_, i64, 0xFFFFFFFF)));
}

} // namespace m3idx::lowering
