// Host legalization of the small-float conversions the DSL emits. MLIR 22 has no native host
// lowering of truncf to f8E4M3FN (its apfloat fallback is a slow library call per element), so
// each conversion becomes a few vectorizable integer ops, exact per SPEC §2.
#include "lowering/transforms/Passes.h"

#include <mutex>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace m3idx::lowering {

using namespace mlir;

namespace {

Type withElem(Type like, Type elem) {
  if (auto vt = dyn_cast<VectorType>(like))
    return VectorType::get(vt.getShape(), elem);
  return elem;
}

Value constInt(PatternRewriter &rw, Location loc, Type t, int64_t v) {
  Type e = getElementTypeOrSelf(t);
  auto attr = rw.getIntegerAttr(e, v);
  if (auto vt = dyn_cast<VectorType>(t))
    return arith::ConstantOp::create(rw, loc, DenseElementsAttr::get(vt, TypedAttr(attr)));
  return arith::ConstantOp::create(rw, loc, attr);
}

Value constF32(PatternRewriter &rw, Location loc, Type t, float v) {
  auto attr = rw.getF32FloatAttr(v);
  if (auto vt = dyn_cast<VectorType>(t))
    return arith::ConstantOp::create(rw, loc, DenseElementsAttr::get(vt, TypedAttr(attr)));
  return arith::ConstantOp::create(rw, loc, attr);
}

// The integer bits behind a small-float value, widened to i32. Looks through the bitcast (and a
// trunci from a wider integer) that produced it, so no small-float value survives to LLVM.
Value integerBits(PatternRewriter &rw, Location loc, Value v, int bits) {
  Type i32 = withElem(v.getType(), rw.getI32Type());
  Value src;
  if (auto bc = v.getDefiningOp<arith::BitcastOp>())
    src = bc.getIn();
  else
    src = arith::BitcastOp::create(rw, loc, withElem(v.getType(), rw.getIntegerType(bits)), v);
  if (auto tr = src.getDefiningOp<arith::TruncIOp>()) { // e.g. i8 -> i4: mask instead
    Value wide = tr.getIn();
    Value w32 = getElementTypeOrSelf(wide.getType()).getIntOrFloatBitWidth() == 32
                    ? wide
                    : arith::ExtUIOp::create(rw, loc, i32, wide).getResult();
    return arith::AndIOp::create(rw, loc, w32, constInt(rw, loc, i32, (1 << bits) - 1));
  }
  return arith::ExtUIOp::create(rw, loc, i32, src);
}

// f8E4M3FN -> f32: normal (e + 120) << 23 | m << 20; subnormal m * 2^-9; 0x7F/0xFF NaN.
Value e4m3ToF32(PatternRewriter &rw, Location loc, Value x, Type i32, Type f32) {
  auto c = [&](int64_t v) { return constInt(rw, loc, i32, v); };
  Value sign = arith::ShLIOp::create(rw, loc, arith::AndIOp::create(rw, loc, x, c(0x80)), c(24));
  Value em = arith::AndIOp::create(rw, loc, x, c(0x7F));
  Value normal = arith::AddIOp::create(rw, loc, arith::ShLIOp::create(rw, loc, em, c(20)),
                                       c(120 << 23));
  Value sub = arith::BitcastOp::create(
      rw, loc, i32,
      arith::MulFOp::create(rw, loc, arith::SIToFPOp::create(rw, loc, f32, em),
                            constF32(rw, loc, f32, 1.0f / 512.0f)));
  Value isSub = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::ult, em, c(8));
  Value isNaN = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::eq, em, c(0x7F));
  Value mag = arith::SelectOp::create(rw, loc, isSub, sub, normal);
  mag = arith::SelectOp::create(rw, loc, isNaN, c(0x7FC00000), mag);
  return arith::BitcastOp::create(rw, loc, f32, arith::OrIOp::create(rw, loc, sign, mag));
}

// f4E2M1FN -> f32: codes 0, 1 are 0, 0.5; code c >= 2 is (1 + (c & 1) / 2) * 2^((c >> 1) - 1).
Value e2m1ToF32(PatternRewriter &rw, Location loc, Value x, Type i32, Type f32) {
  auto c = [&](int64_t v) { return constInt(rw, loc, i32, v); };
  Value sign = arith::ShLIOp::create(rw, loc, arith::AndIOp::create(rw, loc, x, c(8)), c(28));
  Value code = arith::AndIOp::create(rw, loc, x, c(7));
  Value general = arith::OrIOp::create(
      rw, loc,
      arith::ShLIOp::create(rw, loc, arith::AddIOp::create(rw, loc, arith::ShRUIOp::create(rw, loc, code, c(1)), c(126)), c(23)),
      arith::ShLIOp::create(rw, loc, arith::AndIOp::create(rw, loc, code, c(1)), c(22)));
  Value mag = arith::SelectOp::create(
      rw, loc, arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::eq, code, c(1)),
      c(0x3F000000), general);
  mag = arith::SelectOp::create(
      rw, loc, arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::eq, code, c(0)), c(0), mag);
  return arith::BitcastOp::create(rw, loc, f32, arith::OrIOp::create(rw, loc, sign, mag));
}

struct ExpandExtF : OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtFOp op, PatternRewriter &rw) const override {
    Type src = getElementTypeOrSelf(op.getIn().getType());
    Type dst = getElementTypeOrSelf(op.getType());
    if (!dst.isF32() || !(isa<Float8E4M3FNType>(src) || isa<Float4E2M1FNType>(src)))
      return failure();
    Location loc = op.getLoc();
    Type i32 = withElem(op.getType(), rw.getI32Type());
    bool f8 = isa<Float8E4M3FNType>(src);
    Value bits = integerBits(rw, loc, op.getIn(), f8 ? 8 : 4);
    rw.replaceOp(op, f8 ? e4m3ToF32(rw, loc, bits, i32, op.getType())
                        : e2m1ToF32(rw, loc, bits, i32, op.getType()));
    return success();
  }
};

// f32 -> f8E4M3FN, round to nearest even, |x| >= 448 -> 448, NaN -> 0x7F. Normal results round
// the f32 mantissa at bit 20; below 2^-6, adding 2^14 makes the hardware round to a multiple of
// 2^-9 (ties to even) and the low bits are the subnormal code.
struct ExpandTruncF : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op, PatternRewriter &rw) const override {
    if (!isa<Float8E4M3FNType>(getElementTypeOrSelf(op.getType())) ||
        !getElementTypeOrSelf(op.getIn().getType()).isF32())
      return failure();
    Location loc = op.getLoc();
    Type f32 = op.getIn().getType();
    Type i32 = withElem(f32, rw.getI32Type());
    auto c = [&](int64_t v) { return constInt(rw, loc, i32, v); };
    Value u = arith::BitcastOp::create(rw, loc, i32, op.getIn());
    Value sign = arith::AndIOp::create(rw, loc, arith::ShRUIOp::create(rw, loc, u, c(24)), c(0x80));
    Value a = arith::AndIOp::create(rw, loc, u, c(0x7FFFFFFF));
    Value lsb = arith::AndIOp::create(rw, loc, arith::ShRUIOp::create(rw, loc, a, c(20)), c(1));
    Value rounded = arith::AddIOp::create(rw, loc, arith::AddIOp::create(rw, loc, a, c(0x7FFFF)), lsb);
    Value normal = arith::SubIOp::create(rw, loc, arith::ShRUIOp::create(rw, loc, rounded, c(20)), c(120 << 3));
    Value magic = arith::AddFOp::create(rw, loc, arith::BitcastOp::create(rw, loc, f32, a),
                                        constF32(rw, loc, f32, 16384.0f));
    Value sub = arith::SubIOp::create(rw, loc, arith::BitcastOp::create(rw, loc, i32, magic), c(0x46800000));
    auto uge = [&](Value x, int64_t v) {
      return arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::uge, x, c(v));
    };
    Value code = arith::SelectOp::create(rw, loc, uge(a, 0x3C800000), normal, sub);
    code = arith::SelectOp::create(rw, loc, uge(a, 0x43E00000), c(0x7E), code);
    code = arith::OrIOp::create(rw, loc, code, sign);
    Value isNaN = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::ugt, a, c(0x7F800000));
    code = arith::SelectOp::create(rw, loc, isNaN, c(0x7F), code);
    Value byte = arith::TruncIOp::create(rw, loc, withElem(f32, rw.getI8Type()), code);
    rw.replaceOpWithNewOp<arith::BitcastOp>(op, op.getType(), byte);
    return success();
  }
};

// bitcast(bitcast(x)) back to x's type is x: when an extf is expanded before the truncf feeding it,
// its integer view of the truncf result meets the truncf's own expansion here.
struct FoldBitcastRoundTrip : OpRewritePattern<arith::BitcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::BitcastOp op, PatternRewriter &rw) const override {
    auto inner = op.getIn().getDefiningOp<arith::BitcastOp>();
    if (!inner || inner.getIn().getType() != op.getType())
      return failure();
    rw.replaceOp(op, inner.getIn());
    return success();
  }
};

struct ExpandSmallFloatsPass
    : PassWrapper<ExpandSmallFloatsPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ExpandSmallFloatsPass)
  ExpandSmallFloatsPass() = default;
  ExpandSmallFloatsPass(const ExpandSmallFloatsPass &other) : PassWrapper(other) {}
  // gfx950 moves f8/f4 vectors into its conversion and MFMA instructions (the amdgpu dialect
  // lowers them as bytes): there, small-float values may stay; only extf/truncf are expanded.
  Option<bool> keepSmallFloatData{*this, "keep-small-float-data",
                                  llvm::cl::desc("allow small-float values that are not converted"),
                                  llvm::cl::init(false)};
  StringRef getArgument() const override { return "m3idx-expand-small-floats"; }
  StringRef getDescription() const override {
    return "Expand f4E2M1FN/f8E4M3FN arith.extf and f8E4M3FN arith.truncf into integer arithmetic";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect>();
  }
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandExtF, ExpandTruncF, FoldBitcastRoundTrip>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    if (keepSmallFloatData)
      return;
    // A small-float value left behind would reach LLVM with no lowering: fail loudly here.
    WalkResult r = getOperation()->walk([](Operation *op) {
      for (Type t : op->getResultTypes())
        if (isa<Float8E4M3FNType, Float4E2M1FNType>(getElementTypeOrSelf(t)))
          return op->emitError("small-float value left after m3idx-expand-small-floats"),
                 WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass> createExpandSmallFloatsPass() {
  return std::make_unique<ExpandSmallFloatsPass>();
}

void registerPasses() {
  static std::once_flag once;
  std::call_once(once, [] { PassRegistration<ExpandSmallFloatsPass>(); });
}

} // namespace m3idx::lowering
