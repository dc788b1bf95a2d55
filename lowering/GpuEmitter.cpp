// The GPU form of the DSL (see MlirEmitter.h): a program is a CTA of kGpuThreads threads; a tile
// is spread blocked over them; cross-lane ops become warp shuffles or go through a workgroup
// buffer between barriers; scalars are uniform.
#include <limits>
#include <map>

#include "core/Nvfp4.h"
#include "lowering/EmitterImpl.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"

namespace m3idx::lowering {

using namespace mlir;


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

void Emitter::declareKeyTable(Block *moduleBody) {
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

// This thread's elements start at lane * perThread and 16 % perThread == 0 (checked when the decode
// was emitted), so they share scale lane * perThread / 16, held by another thread.
mlir::Value Emitter::gpuThreadScale(mlir::Value scales, int64_t perThread) {
  mlir::Type i64 = b_.getI64Type();
  return gpuExtractDynamic(
      scales, scaleLanes_,
      arith::DivSIOp::create(b_, arith::MulIOp::create(b_, laneI64(), constant(i64, perThread)),
                             constant(i64, 16)));
}

mlir::Value Emitter::gpuKeysF32(const dsl::Op &decode) {
  mlir::Value packed = values_[decode.operands[0].id], scales = values_[decode.operands[1].id];
  const int64_t kp = cast<VectorType>(packed.getType()).getNumElements(), ko = 2 * kp;
  mlir::Type i32 = b_.getI32Type();
  mlir::Value scale = gpuThreadScale(scales, ko);
  mlir::Value row = arith::MulIOp::create(b_, arith::ExtUIOp::create(b_, i32, scale), constant(i32, 16));
  mlir::Value out = constant(VectorType::get({ko}, b_.getF32Type()), 0);
  for (int64_t j = 0; j < ko; ++j) {
    mlir::Value byte = arith::ExtUIOp::create(
        b_, i32, vector::ExtractOp::create(b_, packed, ArrayRef<int64_t>{j / 2}));
    mlir::Value nibble = arith::AndIOp::create(
        b_, j % 2 ? mlir::Value(arith::ShRUIOp::create(b_, byte, constant(i32, 4))) : byte,
        constant(i32, 15));
    mlir::Value idx = arith::IndexCastOp::create(b_, b_.getIndexType(),
                                                 arith::AddIOp::create(b_, row, nibble));
    mlir::Value v = memref::LoadOp::create(b_, keyTable_, ValueRange{idx});
    out = vector::InsertOp::create(b_, v, out, ArrayRef<int64_t>{j});
  }
  return out;
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
  bool decodes = false;
  definingOp_.assign(k_.valueTypes.size(), -1);
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    for (dsl::ValueId r : k_.ops[i].results)
      definingOp_[r.id] = static_cast<int32_t>(i);
    decodes |= k_.ops[i].kind == OpKind::DecodeNvfp4;
  }
  if (decodes)
    declareKeyTable(gpuModule.getBody());
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
  if (decodes)
    keyTable_ = memref::GetGlobalOp::create(b_, MemRefType::get({16 * 256}, b_.getF32Type()),
                                            "m3idx_nvfp4_keys");
  programId_ = arith::IndexCastOp::create(b_, b_.getI64Type(), gpu::BlockIdOp::create(b_, gpu::Dimension::x));
  emitRegion(k_.body);
  gpu::ReturnOp::create(b_);
  if (!error_.empty())
    return Status::error(fmt::format("kernel @{}: GPU lowering: {}", k_.name, error_));
  if (failed(verify(*module)))
    return Status::error(fmt::format("kernel @{}: emitted GPU MLIR does not verify", k_.name));
  return module;
}

} // namespace m3idx::lowering
