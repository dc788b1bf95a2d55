#include "lowering/MlirEmitter.h"
#include "lowering/EmitterImpl.h"
#include "lowering/Layouts.h"

#include <map>

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "tile/FromDsl.h"

namespace m3idx::lowering {

using namespace mlir;
using dsl::Elem;
using dsl::OpKind;

void loadDialects(MLIRContext &ctx) {
  // The tile dialect too: the emitter's per-thread types are conversions of its tile types.
  ctx.loadDialect<amdgpu::AMDGPUDialect, NVVM::NVVMDialect, arith::ArithDialect, func::FuncDialect, gpu::GPUDialect, LLVM::LLVMDialect,
                  memref::MemRefDialect, scf::SCFDialect, vector::VectorDialect, tile::TileDialect>();
}

mlir::Type Emitter::type(dsl::Type t) {
  mlir::Type e = elemType(b_, t.elem);
  if (!t.isTile())
    return e;
  return VectorType::get({gpu_.chunk(t.lanes)}, e);
}

mlir::Type Emitter::valueType(dsl::ValueId v) {
  const dsl::Type t = k_.typeOf(v);
  if (!t.isTile())
    return type(t);
  auto tile = tile::withLayout(RankedTensorType::get({t.lanes}, elemType(b_, t.elem)), spreadOf(v));
  mlir::Type converted = types_.convertType(tile);
  if (!converted)
    fail(fmt::format("{} has no type for a tile in layout {}", target_.name(),
                     tile::stringifyLayout(spreadOf(v)).str()));
  return converted ? converted : type(t);
}

void Emitter::openRegionBlock(mlir::Block *block) {
  if (!block->empty() && block->back().hasTrait<OpTrait::IsTerminator>())
    block->back().erase(); // the builder's implicit yield: the region's own Yield op makes one
  b_.setInsertionPointToEnd(block);
}

void Emitter::fail(const std::string &what) {
  if (error_.empty())
    error_ = what + (currentOp_ ? sourceOf(*currentOp_) : "");
}

void Emitter::emitOpAt(const dsl::Op &op) {
  const mlir::Location outer = b_.getLoc();
  const dsl::Op *outerOp = currentOp_;
  b_.setLoc(locOf(b_, op));
  currentOp_ = &op;
  emitOp(op);
  currentOp_ = outerOp;
  b_.setLoc(outer);
}

void Emitter::emitRegion(const dsl::Region &r) {
  for (int32_t i : r.ops) {
    emitOpAt(k_.ops[i]);
    for (dsl::ValueId v : k_.ops[i].results) // a convert_layout of the layout pass: for all uses
      if (auto c = converts_.find(v.id); c != converts_.end()) {
        mlir::Value converted =
            program_->convertLayout(k_.typeOf(v), values_[v.id], spread_[v.id], c->second, convertBuf_.at(v.id));
        if (!converted)
          fail(fmt::format("{} has no convert_layout from {} to {}", target_.name(),
                           tile::stringifyLayout(spread_[v.id]).str(), tile::stringifyLayout(c->second).str()));
        values_[v.id] = converted ? converted : values_[v.id];
        spread_[v.id] = c->second;
      }
    for (dsl::ValueId v : k_.ops[i].results) // a dot.tiles b operand: staged once, where defined
      if (v.id < static_cast<int32_t>(dotStageOf_.size()) && dotStageOf_[v.id] >= 0 &&
          !dotStage_.count(v.id)) {
        program_->beforeStaging();
        stageDotOperand(v, /*barrierBefore=*/false);
      }
  }
}

// Every thread's earlier stores reach the barrier before one thread's release fence (cumulative:
// it orders what that thread has observed) and its atomic; the old value goes to all lanes by a
// shuffle, and each lane's acquire fence orders its later loads after the atomic.
mlir::Value Emitter::atomicAdd(mlir::Value buf, mlir::Value at, mlir::Value v) {
  const char *scope = target_.deviceSyncScope();
  auto add = [&] {
    return memref::AtomicRMWOp::create(b_, arith::AtomicRMWKind::addi, v, buf, ValueRange{toIndex(b_, at)})
        .getResult();
  };
  gpu_.barrier();
  LLVM::FenceOp::create(b_, LLVM::AtomicOrdering::release, scope);
  auto first = scf::IfOp::create(b_, TypeRange{v.getType()}, gpu_.laneBelow(1), /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(first.thenBlock());
    scf::YieldOp::create(b_, ValueRange{add()});
    b_.setInsertionPointToStart(first.elseBlock());
    scf::YieldOp::create(b_, ValueRange{constant(b_, v.getType(), 0)});
  }
  mlir::Value old = gpu_.shuffleIdx(first.getResult(0), constant(b_, b_.getI64Type(), 0));
  LLVM::FenceOp::create(b_, LLVM::AtomicOrdering::acquire, scope);
  return old;
}

void Emitter::emitOp(const dsl::Op &op) {
  if (program_->ownsOp(op)) {
    program_->emitOwnedOp(op);
    return;
  }
  auto in = [&](size_t i) { return get(op.operands[i]); };
  auto resultType = [&](size_t i = 0) { return valueType(op.results[i]); };
  auto set = [&](mlir::Value v) { values_[op.results[0].id] = v; };
  switch (op.kind) {
  case OpKind::ConstInt: set(constant(b_, resultType(), static_cast<double>(op.intAttr))); return;
  case OpKind::ConstFloat: set(constant(b_, resultType(), op.floatAttr)); return;
  case OpKind::ScalarArg: set(scalars_[op.intAttr]); return;
  case OpKind::ProgramId: set(programId_); return;
  case OpKind::Iota: {
    auto vt = cast<VectorType>(resultType()); // lane * k + [0, k)
    const int64_t k = vt.getNumElements();
    SmallVector<int64_t> steps;
    for (int64_t i = 0; i < k; ++i)
      steps.push_back(i);
    mlir::Value base = vector::BroadcastOp::create(
        b_, vt, arith::MulIOp::create(b_, gpu_.laneI64(), constant(b_, b_.getI64Type(), k)));
    set(arith::AddIOp::create(
        b_, base, arith::ConstantOp::create(b_, DenseElementsAttr::get(vt, ArrayRef<int64_t>(steps)))));
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
  case OpKind::ExtF:
    if (const int32_t def = definingOp_[op.operands[0].id]; def >= 0 && k_.ops[def].kind == OpKind::DecodeNvfp4)
      if (mlir::Value keys = program_->keysF32(k_.ops[def])) {
        set(keys); // the decode itself becomes dead and is removed
        return;
      }
    set(arith::ExtFOp::create(b_, resultType(), in(0)));
    return;
  case OpKind::TruncF: set(arith::TruncFOp::create(b_, resultType(), in(0))); return;
  case OpKind::Bitcast: set(arith::BitcastOp::create(b_, resultType(), in(0))); return;
  case OpKind::ClampF: {
    mlir::Type t = in(0).getType();
    set(arith::MaximumFOp::create(b_, arith::MinimumFOp::create(b_, in(0), constant(b_, t, op.floatAttr)),
                                  constant(b_, t, -op.floatAttr)));
    return;
  }
  case OpKind::Splat: set(vector::BroadcastOp::create(b_, resultType(), in(0))); return;
  case OpKind::ExtractAt:
    set(gpu_.extractDynamic(in(0), k_.typeOf(op.operands[0]).lanes, in(1)));
    return;
  case OpKind::Extract:
    set(gpu_.extract(in(0), k_.typeOf(op.operands[0]).lanes, op.intAttr));
    return;
  case OpKind::Shuffle: {
    dsl::Type t = k_.typeOf(op.operands[0]);
    set(gpu_.shuffle(in(0), in(1), t.lanes, op.lanesAttr, t.elem,
                     {madeBySplat(op.operands[0]), madeBySplat(op.operands[1])}));
    return;
  }
  case OpKind::ReduceAdd: case OpKind::ReduceMax: {
    bool isF = isa<FloatType>(getElementTypeOrSelf(in(0).getType()));
    set(gpu_.warpReduce(in(0), k_.typeOf(op.operands[0]).lanes, op.kind == OpKind::ReduceAdd, isF));
    return;
  }
  case OpKind::FoldMax: {
    const int64_t lanes = k_.typeOf(op.operands[0]).lanes, d = op.intAttr;
    if (gpu_.partial(lanes / 2) || gpu_.chunk(lanes) % (2 * d) != 0) { // pairs must be in one thread
      fail(fmt::format("fold.max: pairs {} apart across threads ({} lanes, {} per thread)", d, lanes,
                             gpu_.partial(lanes) ? 1 : gpu_.chunk(lanes)));
      set(constant(b_, resultType(), 0));
      return;
    }
    // lanes i (bit d clear) and i + d of the vector this thread holds
    const int64_t n = cast<VectorType>(in(0).getType()).getNumElements();
    SmallVector<int64_t> low, high;
    for (int64_t i = 0; i < n; ++i)
      if ((i & d) == 0) {
        low.push_back(i);
        high.push_back(i + d);
      }
    set(maxNum(vector::ShuffleOp::create(b_, in(0), in(0), low), vector::ShuffleOp::create(b_, in(0), in(0), high)));
    return;
  }
  case OpKind::ReduceMaxGroups: {
    const int64_t lanes = k_.typeOf(op.operands[0]).lanes, groups = op.intAttr;
    set(gpu_.reduceMaxGroups(in(0), lanes, groups));
    return;
  }
  case OpKind::LoadTileMasked:
    set(loadTileMasked(buffers_[op.intAttr], in(0), in(1), k_.typeOf(op.results[0]).lanes,
                       elemType(b_, k_.typeOf(op.results[0]).elem), op.alignAttr));
    return;
  case OpKind::DotTiles:
    set(gpuDotTiles(op));
    return;
  case OpKind::Load:
    set(memref::LoadOp::create(b_, buffers_[op.intAttr], ValueRange{toIndex(b_, in(0))}));
    return;
  case OpKind::LoadTile:
    set(gpu_.loadTile(buffers_[op.intAttr], in(0), k_.typeOf(op.results[0]).lanes,
                      elemType(b_, k_.typeOf(op.results[0]).elem), op.alignAttr));
    return;
  case OpKind::Store: { // scalars are uniform: one thread writes
    auto first = scf::IfOp::create(b_, TypeRange{}, gpu_.laneBelow(1), /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(first.thenBlock()->getTerminator());
    memref::StoreOp::create(b_, in(1), buffers_[op.intAttr], ValueRange{toIndex(b_, in(0))});
    return;
  }
  case OpKind::AtomicAdd:
    set(atomicAdd(buffers_[op.intAttr], in(0), in(1)));
    return;
  case OpKind::GridAwait: case OpKind::GridRelease:
    program_->orderGrids(op.kind);
    return;
  case OpKind::StoreTile:
    gpu_.storeTile(buffers_[op.intAttr], in(0), in(1), k_.typeOf(op.operands[1]).lanes);
    return;
  case OpKind::StoreScatter:
    gpu_.storeScatter(buffers_[op.intAttr], in(0), in(1), in(2), k_.typeOf(op.operands[1]).lanes);
    return;
  case OpKind::DecodeNvfp4: {
    if (spreadOf(op.results[0]) == Spread::MmaRows) { // whole scale groups per thread by construction
      set(program_->decodeNvfp4(in(0), in(1)));
      return;
    }
    const int64_t P = k_.typeOf(op.operands[0]).lanes;
    const int64_t outChunk = gpu_.chunk(2 * P);
    const int64_t S = k_.typeOf(op.operands[1]).lanes;
    const bool ownScales = outChunk % 16 == 0 && !gpu_.partial(S) && gpu_.chunk(S) * 16 == outChunk;
    if (gpu_.partial(P) || outChunk != 2 * gpu_.chunk(P) || (16 % outChunk != 0 && !ownScales)) {
      fail(fmt::format("nvfp4.decode of {} packed bytes does not distribute over {} threads", P, threads_));
      set(constant(b_, resultType(), 0));
      return;
    }
    scaleLanes_ = S;
    set(program_->decodeNvfp4(in(0), in(1)));
    return;
  }
  case OpKind::Dot: {
    mlir::Value prod = arith::MulFOp::create(b_, in(0), in(1));
    set(gpu_.warpReduce(prod, k_.typeOf(op.operands[0]).lanes, /*add=*/true, /*isFloat=*/true));
    return;
  }
  case OpKind::PackScoreKey: set(packScoreKey(b_, in(0), in(1))); return;
  case OpKind::For: {
    SmallVector<mlir::Value> inits;
    for (size_t i = 3; i < op.operands.size(); ++i)
      inits.push_back(in(i));
    auto forOp = scf::ForOp::create(b_, toIndex(b_, in(0)), toIndex(b_, in(1)), toIndex(b_, in(2)), inits);
    OpBuilder::InsertionGuard guard(b_);
    openRegionBlock(forOp.getBody());
    const dsl::Region &r = op.regions[0];
    values_[r.args[0].id] = arith::IndexCastOp::create(b_, b_.getI64Type(), forOp.getInductionVar());
    for (size_t i = 1; i < r.args.size(); ++i)
      values_[r.args[i].id] = forOp.getRegionIterArgs()[i - 1];
    emitRegion(r);
    SmallVector<mlir::Value> results(forOp.getResults());
    if (int64_t factor = program_->loopUnroll(op); factor > 1) {
      // A hint only: a loop the utility cannot unroll stays rolled, with the same results. One of
      // no more trips than the factor is unrolled whole and erased, its results' uses replaced by
      // the last trip's values: a cast holds a use of each, to read them back from.
      UnrealizedConversionCastOp hold;
      if (!results.empty()) {
        b_.setInsertionPointAfter(forOp);
        hold = UnrealizedConversionCastOp::create(b_, forOp.getResultTypes(), results);
      }
      (void)mlir::loopUnrollByFactor(forOp, static_cast<uint64_t>(factor));
      if (hold) {
        results.assign(hold->getOperands().begin(), hold->getOperands().end());
        hold->erase();
      }
    }
    for (size_t i = 0; i < op.results.size(); ++i)
      values_[op.results[i].id] = results[i];
    return;
  }
  case OpKind::If: {
    SmallVector<mlir::Type> types;
    for (dsl::ValueId r : op.results)
      types.push_back(valueType(r));
    auto ifOp = scf::IfOp::create(b_, types, in(0), /*withElseRegion=*/true);
    for (int r = 0; r < 2; ++r) {
      OpBuilder::InsertionGuard guard(b_);
      openRegionBlock(r == 0 ? ifOp.thenBlock() : ifOp.elseBlock());
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

// This thread's lanes [first, first + c) of the tile, those below min(limit, lanes) read from
// memory, the rest 0 (a masked load touches no memory for them). alignBytes: as load.tile's.
mlir::Value Emitter::loadTileMasked(mlir::Value buf, mlir::Value off, mlir::Value limit,
                                    int64_t lanes, mlir::Type elem, int64_t alignBytes) {
  mlir::Type i64 = b_.getI64Type();
  const int64_t c = gpu_.chunk(lanes);
  mlir::Value first = arith::MulIOp::create(b_, gpu_.laneI64(), constant(b_, i64, c));
  mlir::Value lim = arith::MinSIOp::create(b_, limit, constant(b_, i64, lanes));
  mlir::Value count = arith::MaxSIOp::create(b_, arith::SubIOp::create(b_, lim, first), constant(b_, i64, 0));
  mlir::Value mask = vector::CreateMaskOp::create(b_, VectorType::get({c}, b_.getI1Type()),
                                                  ValueRange{toIndex(b_, count)});
  auto vt = VectorType::get({c}, elem);
  mlir::Value at = toIndex(b_, arith::AddIOp::create(b_, off, first));
  // On GPUs a masked load becomes one guarded load per lane: take the plain vector load (wide where
  // aligned) when all of this thread's lanes are in, none when all are out (a padded tile's rows:
  // a limit at a whole thread's part, as a row's 128 bytes are), the guarded loads between.
  const int64_t partBytes = c * elem.getIntOrFloatBitWidth() / 8;
  const int64_t align = alignBytes ? std::min(alignBytes, partBytes & -partBytes) : 0;
  auto full = scf::IfOp::create(
      b_, TypeRange{vt},
      arith::CmpIOp::create(b_, arith::CmpIPredicate::sge, count, constant(b_, i64, c)), true);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToEnd(full.thenBlock());
  scf::YieldOp::create(b_, ValueRange{vector::LoadOp::create(b_, vt, buf, ValueRange{at}, /*nontemporal=*/false,
                                                             align ? llvm::MaybeAlign(align) : llvm::MaybeAlign())});
  b_.setInsertionPointToEnd(full.elseBlock());
  auto none = scf::IfOp::create(
      b_, TypeRange{vt}, arith::CmpIOp::create(b_, arith::CmpIPredicate::sle, count, constant(b_, i64, 0)), true);
  scf::YieldOp::create(b_, ValueRange{none.getResult(0)});
  b_.setInsertionPointToEnd(none.thenBlock());
  scf::YieldOp::create(b_, ValueRange{constant(b_, vt, 0)});
  b_.setInsertionPointToEnd(none.elseBlock());
  scf::YieldOp::create(
      b_, ValueRange{vector::MaskedLoadOp::create(b_, vt, buf, ValueRange{at}, mask, constant(b_, vt, 0))});
  return full.getResult(0);
}

// fmaxf semantics (a NaN operand yields the other). On GPUs arith.maxnumf lowers to a libdevice
// call (__nv_fmaxf) that stays unresolved unless a CUDA toolkit is found at compile time; the LLVM
// intrinsic lowers to max.f32 everywhere.
mlir::Value Emitter::maxNum(mlir::Value a, mlir::Value b) { return LLVM::MaxNumOp::create(b_, a, b); }

StatusOr<OwningOpRef<ModuleOp>> emitGpuModule(MLIRContext &ctx, const dsl::Kernel &kernel,
                                              const GpuForm &form) {
  loadDialects(ctx);
  Emitter e(ctx, kernel, *form.lowering, form.threads);
  return e.runGpu();
}

} // namespace m3idx::lowering

namespace m3idx::lowering {

StatusOr<std::string> Emitter::layouts() {
  M3IDX_RETURN_IF_ERROR(target_.checkProgram(k_));
  auto layouts = KernelLayouts::assign(k_, target_, threads_);
  if (!layouts.ok())
    return layouts.status();
  spread_ = (*layouts)->spreads();
  for (const dsl::Op &op : k_.ops)
    if (op.kind == OpKind::DotTiles)
      (*layouts)->noteDotUnit(op.results[0], dotUnitName(program_->dotUnit(op)));
  return (*layouts)->print();
}

StatusOr<std::string> gpuLayouts(MLIRContext &ctx, const dsl::Kernel &kernel, const GpuForm &form) {
  loadDialects(ctx);
  Emitter e(ctx, kernel, *form.lowering, form.threads);
  return e.layouts();
}

} // namespace m3idx::lowering
