#include "lowering/MlirEmitter.h"

#include <limits>
#include <map>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"

namespace m3idx::lowering {

using namespace mlir;
using dsl::Elem;
using dsl::OpKind;

void loadDialects(MLIRContext &ctx) {
  ctx.loadDialect<arith::ArithDialect, func::FuncDialect, gpu::GPUDialect, LLVM::LLVMDialect,
                  memref::MemRefDialect, scf::SCFDialect, vector::VectorDialect>();
}

namespace {

class Emitter {
public:
  Emitter(MLIRContext &ctx, const dsl::Kernel &k, bool gpu)
      : k_(k), b_(UnknownLoc::get(&ctx), &ctx), values_(k.valueTypes.size()), gpu_(gpu) {}

  StatusOr<OwningOpRef<ModuleOp>> run();
  StatusOr<OwningOpRef<ModuleOp>> runGpu();

private:
  mlir::Type elemType(Elem e);
  mlir::Type type(dsl::Type t);
  // GPU distribution of a tile of `lanes` lanes over kGpuThreads threads.
  static int64_t chunk(int64_t lanes) { return lanes >= kGpuThreads ? lanes / kGpuThreads : 1; }
  static bool partial(int64_t lanes) { return lanes < kGpuThreads; }
  mlir::Value laneI64();
  mlir::Value laneBelow(int64_t n); // i1: this thread holds a lane of an n-lane tile
  mlir::Value shuffleIdx(mlir::Value v, mlir::Value srcLane); // any int/float scalar
  mlir::Value shuffleXor(mlir::Value v, int32_t mask);
  mlir::Value warpReduce(mlir::Value perThread, int64_t lanes, bool add, bool isFloat);
  mlir::Value gpuExtract(mlir::Value t, int64_t tileLanes, int64_t lane);
  mlir::Value gpuShuffle(mlir::Value a, mlir::Value b, int64_t lanes, ArrayRef<int32_t> mask,
                         dsl::Elem elem);
  mlir::Value gpuLoadTile(mlir::Value buf, mlir::Value off, int64_t lanes, mlir::Type elem);
  void gpuStoreTile(mlir::Value buf, mlir::Value off, mlir::Value v, int64_t lanes);
  mlir::Value smemFor(dsl::Elem e);
  mlir::Value maxNum(mlir::Value a, mlir::Value b);
  mlir::Value gpuExtractDynamic(mlir::Value t, int64_t tileLanes, mlir::Value lane);
  int64_t scaleLanes_ = 0;
  mlir::Value constant(mlir::Type t, double v);
  mlir::Value toIndex(mlir::Value v) { return arith::IndexCastOp::create(b_, b_.getIndexType(), v); }
  mlir::Value get(dsl::ValueId v) { return values_[v.id]; }
  void emitRegion(const dsl::Region &r);
  void emitOp(const dsl::Op &op);
  mlir::Value emitDecodeNvfp4(mlir::Value packed, mlir::Value scales);
  mlir::Value emitPackScoreKey(mlir::Value score, mlir::Value block);

  const dsl::Kernel &k_;
  ImplicitLocOpBuilder b_;
  std::vector<mlir::Value> values_;
  std::vector<mlir::Value> buffers_, scalars_;
  mlir::Value programId_;
  bool gpu_ = false;
  mlir::Value lane_;                          // gpu: thread id (index)
  std::map<int, mlir::Value> smem_;           // gpu: workgroup buffer per element type
  std::string error_;                         // first lowering error
};

mlir::Type Emitter::elemType(Elem e) {
  switch (e) {
  case Elem::I1: return b_.getI1Type();
  case Elem::I8: return b_.getI8Type();
  case Elem::I32: return b_.getI32Type();
  case Elem::I64: return b_.getI64Type();
  case Elem::F32: return b_.getF32Type();
  case Elem::F8E4M3FN: return b_.getType<Float8E4M3FNType>();
  case Elem::F4E2M1FN: return b_.getType<Float4E2M1FNType>();
  }
  return {};
}

mlir::Type Emitter::type(dsl::Type t) {
  mlir::Type e = elemType(t.elem);
  if (!t.isTile())
    return e;
  return VectorType::get({gpu_ ? chunk(t.lanes) : t.lanes}, e);
}

mlir::Value Emitter::constant(mlir::Type t, double v) {
  mlir::Type e = getElementTypeOrSelf(t);
  TypedAttr scalarAttr = isa<FloatType>(e) ? TypedAttr(b_.getFloatAttr(e, v))
                                           : TypedAttr(b_.getIntegerAttr(e, static_cast<int64_t>(v)));
  if (auto vt = dyn_cast<VectorType>(t))
    return arith::ConstantOp::create(b_, DenseElementsAttr::get(vt, scalarAttr));
  return arith::ConstantOp::create(b_, scalarAttr);
}

// SPEC §2 key rule in target-neutral arith: E2M1 and E4M3 widen exactly to f32, the product is
// exact, the clamp to +-448 keeps NaN (maximumf/minimumf propagate it), and truncf rounds to
// nearest even. Each target legalizes the small-float extf/truncf its own way.
mlir::Value Emitter::emitDecodeNvfp4(mlir::Value packed, mlir::Value scales) {
  auto pt = cast<VectorType>(packed.getType());
  const int64_t P = pt.getNumElements(), N = 2 * P;
  mlir::Value lo = arith::AndIOp::create(b_, packed, constant(pt, 15));
  mlir::Value hi = arith::ShRUIOp::create(b_, packed, constant(pt, 4));
  SmallVector<int64_t> interleave;
  for (int64_t i = 0; i < P; ++i)
    interleave.append({i, P + i});
  mlir::Value nibbles = vector::ShuffleOp::create(b_, lo, hi, interleave);
  auto i4 = VectorType::get({N}, b_.getIntegerType(4));
  auto f4 = VectorType::get({N}, b_.getType<Float4E2M1FNType>());
  auto f32N = VectorType::get({N}, b_.getF32Type());
  mlir::Value e2m1 = arith::BitcastOp::create(b_, f4, arith::TruncIOp::create(b_, i4, nibbles));
  mlir::Value values = arith::ExtFOp::create(b_, f32N, e2m1);

  mlir::Value scaleN;
  if (gpu_) {
    // This thread's N consecutive elements share one scale (16 % N == 0, checked by the caller):
    // fetch it from the thread holding that lane of the scale tile.
    mlir::Value byte = gpuExtractDynamic(scales, scaleLanes_, arith::DivSIOp::create(
        b_, arith::MulIOp::create(b_, laneI64(), constant(b_.getI64Type(), N)),
        constant(b_.getI64Type(), 16)));
    auto f8 = VectorType::get({1}, b_.getType<Float8E4M3FNType>());
    mlir::Value one = vector::BroadcastOp::create(b_, VectorType::get({1}, b_.getI8Type()), byte);
    mlir::Value bits = arith::BitcastOp::create(b_, f8, one);
    mlir::Value f = arith::ExtFOp::create(b_, VectorType::get({1}, b_.getF32Type()), bits);
    scaleN = vector::BroadcastOp::create(b_, f32N, vector::ExtractOp::create(b_, f, ArrayRef<int64_t>{0}));
  } else {
    auto st = cast<VectorType>(scales.getType());
    const int64_t S = st.getNumElements();
    auto f8S = VectorType::get({S}, b_.getType<Float8E4M3FNType>());
    mlir::Value scaleBits = arith::BitcastOp::create(b_, f8S, scales);
    mlir::Value scaleF =
        arith::ExtFOp::create(b_, VectorType::get({S}, b_.getF32Type()), scaleBits);
    SmallVector<int64_t> perElement;
    for (int64_t d = 0; d < N; ++d)
      perElement.push_back(d / (N / S));
    scaleN = vector::ShuffleOp::create(b_, scaleF, scaleF, perElement);
  }
  mlir::Value prod = arith::MulFOp::create(b_, values, scaleN);
  mlir::Value clamped = arith::MaximumFOp::create(
      b_, arith::MinimumFOp::create(b_, prod, constant(f32N, 448.0)), constant(f32N, -448.0));
  return arith::TruncFOp::create(b_, VectorType::get({N}, b_.getType<Float8E4M3FNType>()),
                                 clamped);
}

mlir::Value Emitter::emitPackScoreKey(mlir::Value s, mlir::Value block) {
  mlir::Type f32 = b_.getF32Type(), i32 = b_.getI32Type(), i64 = b_.getI64Type();
  mlir::Value isNaN = arith::CmpFOp::create(b_, arith::CmpFPredicate::UNO, s, s);
  s = arith::SelectOp::create(b_, isNaN, constant(f32, -std::numeric_limits<double>::infinity()), s);
  mlir::Value isZero = arith::CmpFOp::create(b_, arith::CmpFPredicate::OEQ, s, constant(f32, 0.0));
  s = arith::SelectOp::create(b_, isZero, constant(f32, 0.0), s); // -0 -> +0
  mlir::Value u = arith::BitcastOp::create(b_, i32, s);
  mlir::Value negative = arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, u, constant(i32, 0));
  mlir::Value ord = arith::SelectOp::create(
      b_, negative, arith::XOrIOp::create(b_, u, constant(i32, -1)),
      arith::OrIOp::create(b_, u, constant(i32, static_cast<double>(INT32_MIN))));
  mlir::Value high = arith::ShLIOp::create(b_, arith::ExtUIOp::create(b_, i64, ord), constant(i64, 32));
  return arith::OrIOp::create(b_, high, arith::AndIOp::create(b_, block, constant(i64, 0xFFFFFFFF)));
}

void Emitter::emitRegion(const dsl::Region &r) {
  for (int32_t i : r.ops)
    emitOp(k_.ops[i]);
}

void Emitter::emitOp(const dsl::Op &op) {
  auto in = [&](size_t i) { return get(op.operands[i]); };
  auto resultType = [&](size_t i = 0) { return type(k_.typeOf(op.results[i])); };
  auto set = [&](mlir::Value v) { values_[op.results[0].id] = v; };
  switch (op.kind) {
  case OpKind::ConstInt: set(constant(resultType(), static_cast<double>(op.intAttr))); return;
  case OpKind::ConstFloat: set(constant(resultType(), op.floatAttr)); return;
  case OpKind::ScalarArg: set(scalars_[op.intAttr]); return;
  case OpKind::ProgramId: set(programId_); return;
  case OpKind::Iota: {
    auto vt = cast<VectorType>(resultType());
    if (gpu_) { // lane * k + [0, k)
      const int64_t k = vt.getNumElements();
      SmallVector<int64_t> steps;
      for (int64_t i = 0; i < k; ++i)
        steps.push_back(i);
      mlir::Value base = vector::BroadcastOp::create(
          b_, vt, arith::MulIOp::create(b_, laneI64(), constant(b_.getI64Type(), k)));
      set(arith::AddIOp::create(
          b_, base, arith::ConstantOp::create(b_, DenseElementsAttr::get(vt, ArrayRef<int64_t>(steps)))));
      return;
    }
    SmallVector<int64_t> lanes;
    for (int64_t i = 0; i < vt.getNumElements(); ++i)
      lanes.push_back(i);
    set(arith::ConstantOp::create(b_, DenseElementsAttr::get(vt, ArrayRef<int64_t>(lanes))));
    return;
  }
  case OpKind::Add:
    set(isa<FloatType>(getElementTypeOrSelf(in(0).getType()))
            ? mlir::Value(arith::AddFOp::create(b_, in(0), in(1)))
            : mlir::Value(arith::AddIOp::create(b_, in(0), in(1))));
    return;
  case OpKind::Sub:
    set(isa<FloatType>(getElementTypeOrSelf(in(0).getType()))
            ? mlir::Value(arith::SubFOp::create(b_, in(0), in(1)))
            : mlir::Value(arith::SubIOp::create(b_, in(0), in(1))));
    return;
  case OpKind::Mul:
    set(isa<FloatType>(getElementTypeOrSelf(in(0).getType()))
            ? mlir::Value(arith::MulFOp::create(b_, in(0), in(1)))
            : mlir::Value(arith::MulIOp::create(b_, in(0), in(1))));
    return;
  case OpKind::DivS: set(arith::DivSIOp::create(b_, in(0), in(1))); return;
  case OpKind::RemS: set(arith::RemSIOp::create(b_, in(0), in(1))); return;
  case OpKind::MinS: set(arith::MinSIOp::create(b_, in(0), in(1))); return;
  case OpKind::MaxS: set(arith::MaxSIOp::create(b_, in(0), in(1))); return;
  case OpKind::MaxNumF: set(maxNum(in(0), in(1))); return;
  case OpKind::And: set(arith::AndIOp::create(b_, in(0), in(1))); return;
  case OpKind::Or: set(arith::OrIOp::create(b_, in(0), in(1))); return;
  case OpKind::Xor: set(arith::XOrIOp::create(b_, in(0), in(1))); return;
  case OpKind::Shl: set(arith::ShLIOp::create(b_, in(0), in(1))); return;
  case OpKind::ShrU: set(arith::ShRUIOp::create(b_, in(0), in(1))); return;
  case OpKind::CmpEq: case OpKind::CmpNe: case OpKind::CmpLtS: case OpKind::CmpLeS:
  case OpKind::CmpGtS: case OpKind::CmpGeS: case OpKind::CmpGtU: {
    arith::CmpIPredicate p = op.kind == OpKind::CmpEq    ? arith::CmpIPredicate::eq
                             : op.kind == OpKind::CmpNe  ? arith::CmpIPredicate::ne
                             : op.kind == OpKind::CmpLtS ? arith::CmpIPredicate::slt
                             : op.kind == OpKind::CmpLeS ? arith::CmpIPredicate::sle
                             : op.kind == OpKind::CmpGtS ? arith::CmpIPredicate::sgt
                             : op.kind == OpKind::CmpGeS ? arith::CmpIPredicate::sge
                                                         : arith::CmpIPredicate::ugt;
    set(arith::CmpIOp::create(b_, p, in(0), in(1)));
    return;
  }
  case OpKind::CmpUnordF: set(arith::CmpFOp::create(b_, arith::CmpFPredicate::UNO, in(0), in(1))); return;
  case OpKind::CmpEqF: set(arith::CmpFOp::create(b_, arith::CmpFPredicate::OEQ, in(0), in(1))); return;
  case OpKind::Select: set(arith::SelectOp::create(b_, in(0), in(1), in(2))); return;
  case OpKind::ExtS: set(arith::ExtSIOp::create(b_, resultType(), in(0))); return;
  case OpKind::ExtU: set(arith::ExtUIOp::create(b_, resultType(), in(0))); return;
  case OpKind::Trunc: set(arith::TruncIOp::create(b_, resultType(), in(0))); return;
  case OpKind::SIToFP: set(arith::SIToFPOp::create(b_, resultType(), in(0))); return;
  case OpKind::ExtF: set(arith::ExtFOp::create(b_, resultType(), in(0))); return;
  case OpKind::TruncF: set(arith::TruncFOp::create(b_, resultType(), in(0))); return;
  case OpKind::Bitcast: set(arith::BitcastOp::create(b_, resultType(), in(0))); return;
  case OpKind::ClampF: {
    mlir::Type t = in(0).getType();
    set(arith::MaximumFOp::create(b_, arith::MinimumFOp::create(b_, in(0), constant(t, op.floatAttr)),
                                  constant(t, -op.floatAttr)));
    return;
  }
  case OpKind::Splat: set(vector::BroadcastOp::create(b_, resultType(), in(0))); return;
  case OpKind::Extract:
    if (gpu_) {
      set(gpuExtract(in(0), k_.typeOf(op.operands[0]).lanes, op.intAttr));
      return;
    }
    set(vector::ExtractOp::create(b_, in(0), ArrayRef<int64_t>{op.intAttr}));
    return;
  case OpKind::Shuffle: {
    if (gpu_) {
      dsl::Type t = k_.typeOf(op.operands[0]);
      set(gpuShuffle(in(0), in(1), t.lanes, op.lanesAttr, t.elem));
      return;
    }
    SmallVector<int64_t> mask(op.lanesAttr.begin(), op.lanesAttr.end());
    set(vector::ShuffleOp::create(b_, in(0), in(1), mask));
    return;
  }
  case OpKind::ReduceAdd: case OpKind::ReduceMax: {
    bool isF = isa<FloatType>(getElementTypeOrSelf(in(0).getType()));
    if (gpu_) {
      set(warpReduce(in(0), k_.typeOf(op.operands[0]).lanes, op.kind == OpKind::ReduceAdd, isF));
      return;
    }
    vector::CombiningKind kind = op.kind == OpKind::ReduceAdd ? vector::CombiningKind::ADD
                                 : isF                        ? vector::CombiningKind::MAXNUMF
                                                              : vector::CombiningKind::MAXSI;
    set(vector::ReductionOp::create(b_, kind, in(0), mlir::Value(),
                                    isF ? arith::FastMathFlags::reassoc : arith::FastMathFlags::none));
    return;
  }
  case OpKind::Load:
    set(memref::LoadOp::create(b_, buffers_[op.intAttr], ValueRange{toIndex(in(0))}));
    return;
  case OpKind::LoadTile:
    if (gpu_) {
      set(gpuLoadTile(buffers_[op.intAttr], in(0), k_.typeOf(op.results[0]).lanes,
                      elemType(k_.typeOf(op.results[0]).elem)));
      return;
    }
    set(vector::LoadOp::create(b_, cast<VectorType>(resultType()), buffers_[op.intAttr],
                               ValueRange{toIndex(in(0))}));
    return;
  case OpKind::Store:
    if (gpu_) { // scalars are uniform: one thread writes
      auto first = scf::IfOp::create(b_, TypeRange{}, laneBelow(1), /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPoint(first.thenBlock()->getTerminator());
      memref::StoreOp::create(b_, in(1), buffers_[op.intAttr], ValueRange{toIndex(in(0))});
      return;
    }
    memref::StoreOp::create(b_, in(1), buffers_[op.intAttr], ValueRange{toIndex(in(0))});
    return;
  case OpKind::StoreTile:
    if (gpu_) {
      gpuStoreTile(buffers_[op.intAttr], in(0), in(1), k_.typeOf(op.operands[1]).lanes);
      return;
    }
    vector::StoreOp::create(b_, in(1), buffers_[op.intAttr], ValueRange{toIndex(in(0))});
    return;
  case OpKind::DecodeNvfp4: {
    if (gpu_) {
      const int64_t P = k_.typeOf(op.operands[0]).lanes;
      const int64_t outChunk = chunk(2 * P);
      if (partial(P) || outChunk != 2 * chunk(P) || 16 % outChunk != 0) {
        if (error_.empty())
          error_ = fmt::format("nvfp4.decode of {} packed bytes does not distribute over {} "
                               "threads",
                               P, kGpuThreads);
        set(constant(resultType(), 0));
        return;
      }
      scaleLanes_ = k_.typeOf(op.operands[1]).lanes;
    }
    set(emitDecodeNvfp4(in(0), in(1)));
    return;
  }
  case OpKind::Dot: {
    mlir::Value prod = arith::MulFOp::create(b_, in(0), in(1));
    if (gpu_) {
      set(warpReduce(prod, k_.typeOf(op.operands[0]).lanes, /*add=*/true, /*isFloat=*/true));
      return;
    }
    // Any summation order is allowed (SPEC §4); reassoc lets the target pick a fast one.
    set(vector::ReductionOp::create(b_, vector::CombiningKind::ADD, prod, mlir::Value(),
                                    arith::FastMathFlags::reassoc));
    return;
  }
  case OpKind::PackScoreKey: set(emitPackScoreKey(in(0), in(1))); return;
  case OpKind::For: {
    SmallVector<mlir::Value> inits;
    for (size_t i = 3; i < op.operands.size(); ++i)
      inits.push_back(in(i));
    auto forOp = scf::ForOp::create(b_, toIndex(in(0)), toIndex(in(1)), toIndex(in(2)), inits);
    OpBuilder::InsertionGuard guard(b_);
    Block *body = forOp.getBody();
    if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
      body->back().erase();
    b_.setInsertionPointToEnd(body);
    const dsl::Region &r = op.regions[0];
    values_[r.args[0].id] = arith::IndexCastOp::create(b_, b_.getI64Type(), forOp.getInductionVar());
    for (size_t i = 1; i < r.args.size(); ++i)
      values_[r.args[i].id] = forOp.getRegionIterArgs()[i - 1];
    emitRegion(r);
    for (size_t i = 0; i < op.results.size(); ++i)
      values_[op.results[i].id] = forOp.getResult(i);
    return;
  }
  case OpKind::If: {
    SmallVector<mlir::Type> types;
    for (dsl::ValueId r : op.results)
      types.push_back(type(k_.typeOf(r)));
    auto ifOp = scf::IfOp::create(b_, types, in(0), /*withElseRegion=*/true);
    for (int r = 0; r < 2; ++r) {
      OpBuilder::InsertionGuard guard(b_);
      Block *block = r == 0 ? ifOp.thenBlock() : ifOp.elseBlock();
      if (!block->empty() && block->back().hasTrait<OpTrait::IsTerminator>())
        block->back().erase();
      b_.setInsertionPointToEnd(block);
      emitRegion(op.regions[r]);
    }
    for (size_t i = 0; i < op.results.size(); ++i)
      values_[op.results[i].id] = ifOp.getResult(i);
    return;
  }
  case OpKind::Yield: {
    SmallVector<mlir::Value> vs;
    for (size_t i = 0; i < op.operands.size(); ++i)
      vs.push_back(in(i));
    scf::YieldOp::create(b_, vs);
    return;
  }
  }
}


// fmaxf semantics (a NaN operand yields the other). On GPUs arith.maxnumf lowers to a libdevice
// call (__nv_fmaxf) that stays unresolved unless a CUDA toolkit is found at compile time; the LLVM
// intrinsic lowers to max.f32 everywhere.
mlir::Value Emitter::maxNum(mlir::Value a, mlir::Value b) {
  if (gpu_)
    return LLVM::MaxNumOp::create(b_, a, b);
  return arith::MaxNumFOp::create(b_, a, b);
}

// ---- GPU distribution helpers ------------------------------------------------------------------

mlir::Value Emitter::laneI64() { return arith::IndexCastOp::create(b_, b_.getI64Type(), lane_); }

mlir::Value Emitter::laneBelow(int64_t n) {
  return arith::CmpIOp::create(b_, arith::CmpIPredicate::ult, laneI64(),
                               constant(b_.getI64Type(), static_cast<double>(n)));
}

// gpu.shuffle moves 32-bit values: narrower values are widened, i64 goes as two halves.
mlir::Value Emitter::shuffleIdx(mlir::Value v, mlir::Value srcLane) {
  mlir::Value width = constant(b_.getI32Type(), kGpuThreads);
  mlir::Value src = arith::TruncIOp::create(b_, b_.getI32Type(), srcLane);
  auto move32 = [&](mlir::Value x) {
    return gpu::ShuffleOp::create(b_, x.getType(), b_.getI1Type(), x, src, width,
                                  gpu::ShuffleModeAttr::get(b_.getContext(), gpu::ShuffleMode::IDX))
        .getShuffleResult();
  };
  mlir::Type t = v.getType();
  if (t.isF32() || t.isInteger(32))
    return move32(v);
  if (t.isInteger(64)) {
    mlir::Value lo = move32(arith::TruncIOp::create(b_, b_.getI32Type(), v));
    mlir::Value hi = move32(arith::TruncIOp::create(
        b_, b_.getI32Type(), arith::ShRUIOp::create(b_, v, constant(t, 32))));
    return arith::OrIOp::create(
        b_, arith::ShLIOp::create(b_, arith::ExtUIOp::create(b_, t, hi), constant(t, 32)),
        arith::ExtUIOp::create(b_, t, lo));
  }
  return arith::TruncIOp::create(b_, t, move32(arith::ExtUIOp::create(b_, b_.getI32Type(), v)));
}

mlir::Value Emitter::shuffleXor(mlir::Value v, int32_t mask) {
  auto op = gpu::ShuffleOp::create(b_, v, mask, kGpuThreads, gpu::ShuffleMode::XOR);
  return op.getShuffleResult();
}

// Reduces a distributed tile to a uniform scalar: within the thread, then a butterfly over the
// warp. Lanes a partial tile does not have contribute the identity.
mlir::Value Emitter::warpReduce(mlir::Value perThread, int64_t lanes, bool add, bool isFloat) {
  mlir::Type e = getElementTypeOrSelf(perThread.getType());
  vector::CombiningKind kind = add ? vector::CombiningKind::ADD
                               : isFloat ? vector::CombiningKind::MAXNUMF
                                         : vector::CombiningKind::MAXSI;
  mlir::Value s = vector::ReductionOp::create(b_, kind, perThread, mlir::Value(),
                                              isFloat ? arith::FastMathFlags::reassoc
                                                      : arith::FastMathFlags::none);
  if (!e.isF32() && !e.isInteger(32)) {
    if (error_.empty())
      error_ = "a GPU reduction over a tile of a type other than i32 or f32";
    return s;
  }
  mlir::Value identity =
      add ? constant(e, 0.0)
          : isFloat ? constant(e, -std::numeric_limits<double>::infinity())
                    : constant(e, static_cast<double>(INT32_MIN));
  if (partial(lanes))
    s = arith::SelectOp::create(b_, laneBelow(lanes), s, identity);
  for (int32_t off = kGpuThreads / 2; off >= 1; off /= 2) {
    mlir::Value other = shuffleXor(s, off);
    s = add ? (isFloat ? mlir::Value(arith::AddFOp::create(b_, s, other))
                       : mlir::Value(arith::AddIOp::create(b_, s, other)))
            : (isFloat ? maxNum(s, other)
                       : mlir::Value(arith::MaxSIOp::create(b_, s, other)));
  }
  return s;
}

mlir::Value Emitter::gpuExtract(mlir::Value t, int64_t tileLanes, int64_t lane) {
  const int64_t k = chunk(tileLanes);
  mlir::Value mine = vector::ExtractOp::create(b_, t, ArrayRef<int64_t>{partial(tileLanes) ? 0 : lane % k});
  return shuffleIdx(mine, constant(b_.getI64Type(), static_cast<double>(partial(tileLanes) ? lane : lane / k)));
}

// Lane `lane` (a per-thread value) of a distributed tile: every register a holder may keep it in is
// shuffled from its holder, then the right one selected (shuffles need one register index for all
// threads).
mlir::Value Emitter::gpuExtractDynamic(mlir::Value t, int64_t tileLanes, mlir::Value lane) {
  const int64_t k = chunk(tileLanes);
  mlir::Type i64 = b_.getI64Type();
  mlir::Value holder = partial(tileLanes) ? lane : arith::DivSIOp::create(b_, lane, constant(i64, k));
  mlir::Value reg = partial(tileLanes) ? constant(i64, 0) : arith::RemSIOp::create(b_, lane, constant(i64, k));
  mlir::Value result;
  for (int64_t j = 0; j < k; ++j) {
    mlir::Value v = shuffleIdx(vector::ExtractOp::create(b_, t, ArrayRef<int64_t>{j}), holder);
    result = j == 0 ? v
                    : mlir::Value(arith::SelectOp::create(
                          b_, arith::CmpIOp::create(b_, arith::CmpIPredicate::eq, reg, constant(i64, j)),
                          v, result));
  }
  return result;
}

mlir::Value Emitter::smemFor(dsl::Elem e) {
  return smem_.at(static_cast<int>(e == dsl::Elem::I1 ? dsl::Elem::I8 : e));
}

// A general lane permutation through the workgroup buffer: all threads write their lanes of a and
// b, wait, read the lanes the mask names, wait (so the buffer can be reused).
mlir::Value Emitter::gpuShuffle(mlir::Value a, mlir::Value b, int64_t lanes, ArrayRef<int32_t> mask,
                                dsl::Elem elem) {
  const bool isBool = elem == dsl::Elem::I1;
  mlir::Value buf = smemFor(elem);
  mlir::Type i64 = b_.getI64Type(), e = elemType(elem);
  mlir::Type stored = isBool ? b_.getI8Type() : e;
  const int64_t k = chunk(lanes);
  auto writeTile = [&](mlir::Value tile, int64_t base) {
    auto body = [&] {
      for (int64_t j = 0; j < k; ++j) {
        mlir::Value v = vector::ExtractOp::create(b_, tile, ArrayRef<int64_t>{j});
        if (isBool)
          v = arith::ExtUIOp::create(b_, stored, v);
        mlir::Value at = arith::AddIOp::create(
            b_, arith::MulIOp::create(b_, laneI64(), constant(i64, k)), constant(i64, base + j));
        memref::StoreOp::create(b_, v, buf, ValueRange{toIndex(at)});
      }
    };
    if (!partial(lanes))
      return body();
    auto guard = scf::IfOp::create(b_, TypeRange{}, laneBelow(lanes), false);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(guard.thenBlock()->getTerminator());
    body();
  };
  writeTile(a, 0);
  writeTile(b, lanes);
  gpu::BarrierOp::create(b_);
  const int64_t outLanes = static_cast<int64_t>(mask.size()), kOut = chunk(outLanes);
  SmallVector<int64_t> table(mask.begin(), mask.end());
  mlir::Value maskTable = arith::ConstantOp::create(
      b_, DenseElementsAttr::get(VectorType::get({outLanes}, i64), ArrayRef<int64_t>(table)));
  mlir::Value out = constant(VectorType::get({kOut}, e), 0);
  for (int64_t j = 0; j < kOut; ++j) {
    mlir::Value outLane = arith::AddIOp::create(
        b_, arith::MulIOp::create(b_, laneI64(), constant(i64, kOut)), constant(i64, j));
    if (partial(outLanes)) // threads past the tile read lane 0's source: in range, unused
      outLane = arith::SelectOp::create(b_, laneBelow(outLanes), outLane, constant(i64, 0));
    // Which source lane: a select chain for short masks (a dynamic index into a constant vector
    // would go through local memory), an indexed read of the table otherwise.
    mlir::Value src;
    if (outLanes <= kGpuThreads) {
      src = constant(i64, static_cast<double>(table[0]));
      for (int64_t m = 1; m < outLanes; ++m)
        src = arith::SelectOp::create(
            b_, arith::CmpIOp::create(b_, arith::CmpIPredicate::eq, outLane, constant(i64, m)),
            constant(i64, static_cast<double>(table[m])), src);
    } else {
      src = vector::ExtractOp::create(b_, maskTable, ArrayRef<OpFoldResult>{toIndex(outLane)});
    }
    mlir::Value v = memref::LoadOp::create(b_, buf, ValueRange{toIndex(src)});
    if (isBool)
      v = arith::TruncIOp::create(b_, e, v);
    out = vector::InsertOp::create(b_, v, out, ArrayRef<int64_t>{j});
  }
  gpu::BarrierOp::create(b_);
  return out;
}

mlir::Value Emitter::gpuLoadTile(mlir::Value buf, mlir::Value off, int64_t lanes, mlir::Type elem) {
  const int64_t k = chunk(lanes);
  auto vt = VectorType::get({k}, elem);
  mlir::Value at = arith::AddIOp::create(
      b_, off, arith::MulIOp::create(b_, laneI64(), constant(b_.getI64Type(), k)));
  if (!partial(lanes))
    return vector::LoadOp::create(b_, vt, buf, ValueRange{toIndex(at)});
  // An scf.if with results is built without terminators: each branch yields its value.
  auto guard = scf::IfOp::create(b_, TypeRange{vt}, laneBelow(lanes), true);
  {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToEnd(guard.thenBlock());
    scf::YieldOp::create(b_, ValueRange{vector::LoadOp::create(b_, vt, buf, ValueRange{toIndex(at)})});
    b_.setInsertionPointToEnd(guard.elseBlock());
    scf::YieldOp::create(b_, ValueRange{constant(vt, 0)});
  }
  return guard.getResult(0);
}

void Emitter::gpuStoreTile(mlir::Value buf, mlir::Value off, mlir::Value v, int64_t lanes) {
  const int64_t k = chunk(lanes);
  mlir::Value at = arith::AddIOp::create(
      b_, off, arith::MulIOp::create(b_, laneI64(), constant(b_.getI64Type(), k)));
  if (!partial(lanes)) {
    vector::StoreOp::create(b_, v, buf, ValueRange{toIndex(at)});
    return;
  }
  auto guard = scf::IfOp::create(b_, TypeRange{}, laneBelow(lanes), false);
  OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPoint(guard.thenBlock()->getTerminator());
  vector::StoreOp::create(b_, v, buf, ValueRange{toIndex(at)});
}

StatusOr<OwningOpRef<ModuleOp>> Emitter::runGpu() {
  OwningOpRef<ModuleOp> module = ModuleOp::create(b_.getLoc());
  (*module)->setAttr("gpu.container_module", b_.getUnitAttr());
  b_.setInsertionPointToEnd(module->getBody());
  auto gpuModule = gpu::GPUModuleOp::create(b_, "m3idx_kernels");
  b_.setInsertionPointToStart(gpuModule.getBody());
  SmallVector<mlir::Type> argTypes;
  for (const dsl::BufferArg &buf : k_.buffers)
    argTypes.push_back(MemRefType::get({ShapedType::kDynamic}, elemType(buf.elem)));
  for (const dsl::ScalarArgDecl &sc : k_.scalars)
    argTypes.push_back(elemType(sc.elem));
  // One workgroup buffer per element type a general shuffle moves, sized for the largest.
  std::map<int, int64_t> smemLanes;
  for (const dsl::Op &op : k_.ops)
    if (op.kind == OpKind::Shuffle) {
      dsl::Type t = k_.typeOf(op.operands[0]);
      int e = static_cast<int>(t.elem == Elem::I1 ? Elem::I8 : t.elem);
      smemLanes[e] = std::max<int64_t>(smemLanes[e], 2 * t.lanes);
    }
  auto workgroup = gpu::AddressSpaceAttr::get(b_.getContext(), gpu::AddressSpace::Workgroup);
  SmallVector<mlir::Type> smemTypes;
  for (auto [e, n] : smemLanes)
    smemTypes.push_back(MemRefType::get({n}, elemType(static_cast<Elem>(e)), MemRefLayoutAttrInterface{}, workgroup));
  auto fn = gpu::GPUFuncOp::create(b_, k_.name, b_.getFunctionType(argTypes, {}), smemTypes);
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b_.getUnitAttr());
  fn.setKnownBlockSizeAttr(b_.getDenseI32ArrayAttr({kGpuThreads, 1, 1}));
  Block *entry = &fn.getBody().front();
  b_.setInsertionPointToStart(entry);
  size_t a = 0;
  for (size_t i = 0; i < k_.buffers.size(); ++i)
    buffers_.push_back(entry->getArgument(a++));
  for (size_t i = 0; i < k_.scalars.size(); ++i)
    scalars_.push_back(entry->getArgument(a++));
  size_t w = 0;
  for (auto [e, n] : smemLanes)
    smem_[e] = fn.getWorkgroupAttributions()[w++];
  lane_ = gpu::ThreadIdOp::create(b_, gpu::Dimension::x);
  programId_ = arith::IndexCastOp::create(b_, b_.getI64Type(), gpu::BlockIdOp::create(b_, gpu::Dimension::x));
  emitRegion(k_.body);
  gpu::ReturnOp::create(b_);
  if (!error_.empty())
    return Status::error(fmt::format("kernel @{}: GPU lowering: {}", k_.name, error_));
  if (failed(verify(*module)))
    return Status::error(fmt::format("kernel @{}: emitted GPU MLIR does not verify", k_.name));
  return module;
}

StatusOr<OwningOpRef<ModuleOp>> Emitter::run() {
  OwningOpRef<ModuleOp> module = ModuleOp::create(b_.getLoc());
  b_.setInsertionPointToEnd(module->getBody());
  SmallVector<mlir::Type> argTypes;
  for (const dsl::BufferArg &buf : k_.buffers)
    argTypes.push_back(MemRefType::get({ShapedType::kDynamic}, elemType(buf.elem)));
  for (const dsl::ScalarArgDecl &s : k_.scalars)
    argTypes.push_back(elemType(s.elem));
  argTypes.append({b_.getI64Type(), b_.getI64Type()}); // pid_begin, pid_end
  auto fn = func::FuncOp::create(b_, k_.name, b_.getFunctionType(argTypes, {}));
  fn->setAttr("llvm.emit_c_interface", b_.getUnitAttr());
  Block *entry = fn.addEntryBlock();
  b_.setInsertionPointToEnd(entry);
  size_t a = 0;
  for (size_t i = 0; i < k_.buffers.size(); ++i)
    buffers_.push_back(entry->getArgument(a++));
  for (size_t i = 0; i < k_.scalars.size(); ++i)
    scalars_.push_back(entry->getArgument(a++));
  mlir::Value pidBegin = entry->getArgument(a++), pidEnd = entry->getArgument(a++);
  auto loop = scf::ForOp::create(b_, toIndex(pidBegin), toIndex(pidEnd),
                                 arith::ConstantIndexOp::create(b_, 1));
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    programId_ = arith::IndexCastOp::create(b_, b_.getI64Type(), loop.getInductionVar());
    emitRegion(k_.body);
    // The DSL body ends in no yield of its own: the kernel body region has none.
  }
  func::ReturnOp::create(b_);
  if (failed(verify(*module)))
    return Status::error(fmt::format("kernel @{}: emitted MLIR does not verify", k_.name));
  return module;
}

} // namespace

StatusOr<OwningOpRef<ModuleOp>> emitHostModule(MLIRContext &ctx, const dsl::Kernel &kernel) {
  loadDialects(ctx);
  Emitter e(ctx, kernel, /*gpu=*/false);
  return e.run();
}

StatusOr<OwningOpRef<ModuleOp>> emitGpuModule(MLIRContext &ctx, const dsl::Kernel &kernel) {
  loadDialects(ctx);
  Emitter e(ctx, kernel, /*gpu=*/true);
  return e.runGpu();
}

} // namespace m3idx::lowering
