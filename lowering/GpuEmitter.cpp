// The GPU form of the DSL (see MlirEmitter.h): a program is a CTA of threads_ threads, each
// tile in the layout its target's pass gave it (blocked: GpuThreads.h); here the kernel function,
// its workgroup memory, the dot operands' staging and dots on FFMA.
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>

#include "core/Nvfp4.h"
#include "core/Spec.h"
#include "lowering/EmitterImpl.h"
#include "lowering/Layouts.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"

namespace m3idx::lowering {

using namespace mlir;

bool Emitter::madeBySplat(dsl::ValueId v) const {
  const int32_t def = definingOp_[v.id];
  return def >= 0 && k_.ops[def].kind == OpKind::Splat;
}

// Writes a dot.tiles b operand into its workgroup buffer (as f32, or as bytes for MFMA, whose
// B fragment is then read once into registers).
void Emitter::stageDotOperand(dsl::ValueId v, bool barrierBefore) {
  mlir::Value buf = stageBufs_[dotStageOf_[v.id]];
  const dsl::Type t = k_.typeOf(v);
  if (barrierBefore)
    gpu_.barrier();
  mlir::Value val = get(v);
  const bool bytes = cast<MemRefType>(buf.getType()).getElementType().isInteger(8);
  if (bytes)
    val = arith::BitcastOp::create(b_, cast<VectorType>(val.getType()).clone(b_.getI8Type()), val);
  else
    val = toF32(b_, val);
  dotStage_[v.id] = buf;
  if (program_->stageOwnLayout(v, buf, val))
    return;
  gpu_.storeTile(buf, constant(b_, b_.getI64Type(), 0), val, t.lanes);
  gpu_.barrier();
  const int64_t rows = t.lanes / spec::kIndexHeadDim;
  if (bytes)
    program_->stageMatrixB(v, buf, rows);
}

// FFMA form: thread t holds ca consecutive lanes of a, i.e. a slice of one row m; it dots the
// slice with every row of the staged b, the g threads of a row sum their parts with xor
// shuffles, and the N x M results reach their owners through a workgroup buffer.
mlir::Value Emitter::gpuDotTiles(const dsl::Op &op) {
  if (DotUnit unit = program_->dotUnit(op); unit != DotUnit::Ffma)
    return program_->matrixDot(op, unit);
  const int64_t k = op.intAttr, aLanes = k_.typeOf(op.operands[0]).lanes;
  const int64_t M = aLanes / k, N = k_.typeOf(op.operands[1]).lanes / k, ca = gpu_.chunk(aLanes);
  mlir::Type f32 = b_.getF32Type(), i64 = b_.getI64Type();
  const auto resultType = VectorType::get({gpu_.chunk(N * M)}, f32);
  if (gpu_.partial(aLanes) || k % ca != 0 || (k / ca) > threads_) {
    fail(fmt::format("dot.tiles: rows of {} lanes do not split evenly over the threads of a "
                           "tile of {} lanes",
                           k, aLanes));
    return constant(b_, resultType, 0);
  }
  const int64_t g = k / ca; // threads per row of a
  if (!dotStage_.count(op.operands[1].id))
    stageDotOperand(op.operands[1], /*barrierBefore=*/true);
  mlir::Value staged = dotStage_[op.operands[1].id];
  const int32_t def = definingOp_[op.operands[0].id];
  mlir::Value a = def >= 0 && k_.ops[def].kind == OpKind::DecodeNvfp4 ? program_->keysF32(k_.ops[def]) : nullptr;
  if (!a) // else the decode itself becomes dead and is removed
    a = toF32(b_, get(op.operands[0]));
  mlir::Value lane = gpu_.laneI64();
  mlir::Value m = arith::DivSIOp::create(b_, lane, constant(b_, i64, g));
  mlir::Value part = arith::RemSIOp::create(b_, lane, constant(b_, i64, g));
  mlir::Value koff = arith::MulIOp::create(b_, part, constant(b_, i64, ca));
  mlir::Value res = dotResult_.at(static_cast<int32_t>(&op - k_.ops.data()));
  for (int64_t n = 0; n < N; ++n) {
    mlir::Value at = arith::AddIOp::create(b_, koff, constant(b_, i64, n * k));
    mlir::Value vb = vector::LoadOp::create(b_, VectorType::get({ca}, f32), staged, ValueRange{toIndex(b_, at)});
    // Products of E4M3 values are exact in f32, so contracting them into FMAs changes nothing.
    auto fm = arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;
    mlir::Value s = vector::ReductionOp::create(b_, vector::CombiningKind::ADD,
                                                arith::MulFOp::create(b_, a, vb, fm), mlir::Value(), fm);
    for (int64_t off = g / 2; off >= 1; off /= 2)
      s = arith::AddFOp::create(b_, s, gpu_.shuffleXor(s, static_cast<int32_t>(off)));
    // Thread (m, n % g) of the row's g threads writes result n.
    auto mine = scf::IfOp::create(
        b_, TypeRange{}, arith::CmpIOp::create(b_, arith::CmpIPredicate::eq, part, constant(b_, i64, n % g)),
        false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(mine.thenBlock()->getTerminator());
    memref::StoreOp::create(b_, s, res,
                            ValueRange{toIndex(b_, arith::AddIOp::create(b_, m, constant(b_, i64, n * M)))});
  }
  gpu_.barrier();
  mlir::Value out = gpu_.loadTile(res, constant(b_, i64, 0), N * M, f32);
  gpu_.barrier(); // the buffer is written again by the next tile
  return out;
}

Status Emitter::planProgram() {
  definingOp_.assign(k_.valueTypes.size(), -1);
  for (size_t i = 0; i < k_.ops.size(); ++i)
    for (dsl::ValueId r : k_.ops[i].results)
      definingOp_[r.id] = static_cast<int32_t>(i);
  M3IDX_RETURN_IF_ERROR(target_.checkProgram(k_));
  auto layouts = KernelLayouts::assign(k_, target_, threads_);
  if (!layouts.ok())
    return layouts.status();
  spread_ = (*layouts)->spreads();
  converts_ = (*layouts)->converts();
  return Status();
}

mlir::MemRefType Emitter::workgroupBuffer(int64_t n, mlir::Type e) {
  auto workgroup = gpu::AddressSpaceAttr::get(b_.getContext(), gpu::AddressSpace::Workgroup);
  return MemRefType::get({n}, e, MemRefLayoutAttrInterface{}, workgroup);
}

StatusOr<Emitter::WorkgroupPlan> Emitter::planWorkgroupMemory() {
  WorkgroupPlan plan;
  // One workgroup buffer per element type a general shuffle moves, sized for the largest.
  for (const dsl::Op &op : k_.ops)
    if (op.kind == OpKind::Shuffle) {
      dsl::Type t = k_.typeOf(op.operands[0]);
      int e = static_cast<int>(t.elem == Elem::I1 ? Elem::I8 : t.elem);
      plan.shuffleLanes[e] = std::max<int64_t>(plan.shuffleLanes[e], 2 * t.lanes);
    }
  // dot.tiles: a buffer per distinct b operand (bytes for matrix units, else f32), and one for each
  // op's results unless they move by shuffles (MFMA) or stay in mma.sync or wgmma accumulators.
  using Role = WorkgroupPlan::Role;
  dotStageOf_.assign(k_.valueTypes.size(), -1);
  int64_t dotBytes = 0;
  auto fromDecode = [&](dsl::ValueId v) {
    return definingOp_[v.id] >= 0 && k_.ops[definingOp_[v.id]].kind == OpKind::DecodeNvfp4;
  };
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    const dsl::Op &op = k_.ops[i];
    if (op.kind == OpKind::ExtF && fromDecode(op.operands[0]))
      plan.keysAsF32 = true;
    if (op.kind != OpKind::DotTiles)
      continue;
    const int64_t k = op.intAttr, M = k_.typeOf(op.operands[0]).lanes / k;
    const int64_t bLanes = k_.typeOf(op.operands[1]).lanes, N = bLanes / k;
    const DotUnit unit = program_->dotUnit(op);
    M3IDX_RETURN_IF_ERROR(program_->checkDot(op, unit));
    plan.keysAsF32 |= unit == DotUnit::Ffma && fromDecode(op.operands[0]);
    StatusOr<TargetProgram::DotStaging> staging = program_->planDot(op, unit, bLanes);
    if (!staging.ok())
      return staging.status();
    auto add = [&](Role role, int32_t key, int64_t n, mlir::Type e, int64_t align = 0) {
      plan.dotBuffers.push_back({role, key, workgroupBuffer(n, e), align});
      dotBytes += n * e.getIntOrFloatBitWidth() / 8;
    };
    if (dotStageOf_[op.operands[1].id] < 0) {
      dotStageOf_[op.operands[1].id] = static_cast<int32_t>(stageCount_++);
      add(Role::StageB, op.operands[1].id, staging->elements,
          staging->bytes ? mlir::Type(b_.getI8Type()) : mlir::Type(b_.getF32Type()), staging->align);
    }
    if (!staging->resultInRegisters)
      add(Role::Result, static_cast<int32_t>(i), N * M, b_.getF32Type());
  }
  // A convert_layout goes through a buffer of its tile (convertLayout).
  for (auto [v, to] : converts_) {
    const dsl::Type t = k_.typeOf(dsl::ValueId{v});
    mlir::Type e = elemType(b_, t.elem == Elem::I1 ? Elem::I8 : t.elem);
    plan.dotBuffers.push_back({Role::Convert, v, workgroupBuffer(t.lanes, e)});
    dotBytes += t.lanes * e.getIntOrFloatBitWidth() / 8;
  }
  if (const int64_t floats = program_->exchangeFloats()) {
    plan.dotBuffers.push_back({Role::Exchange, 0, workgroupBuffer(floats, b_.getF32Type())});
    dotBytes += floats * 4;
  }
  if (dotBytes > kMaxDotWorkgroupBytes)
    return Status::error(fmt::format("kernel @{}: dot.tiles needs {} bytes of workgroup memory "
                                     "(at most {}): too many rows x heads for one GPU program",
                                     k_.name, dotBytes, kMaxDotWorkgroupBytes));
  // sm_90 decodes look their keys up in a table of key bytes per scale, built in shared memory
  // when the program starts (where only f32 keys are read, LLVM drops the unread table).
  plan.keyWords = target_.keyTables() && std::any_of(k_.ops.begin(), k_.ops.end(), [](const dsl::Op &op) {
    return op.kind == OpKind::DecodeNvfp4;
  });
  // A loop's carried values of a decode's packed-key type are key tiles loaded ahead (each costs
  // registers for its bytes until it is decoded).
  std::vector<dsl::Type> packedTypes;
  for (const dsl::Op &op : k_.ops)
    if (op.kind == OpKind::DecodeNvfp4)
      packedTypes.push_back(k_.typeOf(op.operands[0]));
  auto packed = [&](dsl::ValueId v) {
    return std::find(packedTypes.begin(), packedTypes.end(), k_.typeOf(v)) != packedTypes.end();
  };
  for (const dsl::Op &op : k_.ops)
    if (op.kind == OpKind::For && !op.regions.empty() && !op.regions[0].args.empty())
      plan.keyTilesInFlight = std::max<int64_t>(
          plan.keyTilesInFlight, std::count_if(op.regions[0].args.begin() + 1, op.regions[0].args.end(), packed));
  return plan;
}

gpu::GPUFuncOp Emitter::declareKernel(const WorkgroupPlan &plan) {
  SmallVector<mlir::Type> argTypes;
  for (const dsl::BufferArg &buf : k_.buffers)
    argTypes.push_back(MemRefType::get({ShapedType::kDynamic}, elemType(b_, buf.elem)));
  for (const dsl::ScalarArgDecl &sc : k_.scalars)
    argTypes.push_back(elemType(b_, sc.elem));
  SmallVector<mlir::Type> smemTypes;
  for (auto [e, n] : plan.shuffleLanes)
    smemTypes.push_back(workgroupBuffer(n, elemType(b_, static_cast<Elem>(e))));
  for (const WorkgroupPlan::Buffer &pb : plan.dotBuffers)
    smemTypes.push_back(pb.type);
  if (plan.keyWords)
    smemTypes.push_back(workgroupBuffer(512, b_.getI32Type()));
  auto fn = gpu::GPUFuncOp::create(b_, k_.name, b_.getFunctionType(argTypes, {}), smemTypes);
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b_.getUnitAttr());
  fn.setKnownBlockSizeAttr(b_.getDenseI32ArrayAttr({threads_, 1, 1}));
  program_->annotate(fn, plan.keyTilesInFlight);
  return fn;
}

void Emitter::bindProgram(gpu::GPUFuncOp fn, const WorkgroupPlan &plan) {
  Block *entry = &fn.getBody().front();
  b_.setInsertionPointToStart(entry);
  size_t a = 0;
  for (size_t i = 0; i < k_.buffers.size(); ++i)
    buffers_.push_back(entry->getArgument(a++));
  for (size_t i = 0; i < k_.scalars.size(); ++i)
    scalars_.push_back(entry->getArgument(a++));
  size_t w = 0;
  std::map<int, mlir::Value> scratch; // a general shuffle's buffer per element type
  for (auto [e, n] : plan.shuffleLanes)
    scratch[e] = fn.getWorkgroupAttributions()[w++];
  stageBufs_.resize(stageCount_);
  mlir::Value exchange;
  for (const WorkgroupPlan::Buffer &pb : plan.dotBuffers) {
    if (pb.align)
      fn.setWorkgroupAttributionAttr(static_cast<unsigned>(w), LLVM::LLVMDialect::getAlignAttrName(),
                                     b_.getI64IntegerAttr(pb.align));
    mlir::Value buf = fn.getWorkgroupAttributions()[w++];
    switch (pb.role) {
    case WorkgroupPlan::Role::StageB: stageBufs_[dotStageOf_[pb.key]] = buf; break;
    case WorkgroupPlan::Role::Result: dotResult_[pb.key] = buf; break;
    case WorkgroupPlan::Role::Exchange: exchange = buf; break;
    case WorkgroupPlan::Role::Convert: convertBuf_[pb.key] = buf; break;
    }
  }
  gpu_.bind(gpu::ThreadIdOp::create(b_, gpu::Dimension::x), std::move(scratch));
  program_->bind(exchange, plan.keysAsF32,
                 plan.keyWords ? mlir::Value(fn.getWorkgroupAttributions()[w++]) : mlir::Value());
  programId_ = arith::IndexCastOp::create(b_, b_.getI64Type(), gpu::BlockIdOp::create(b_, gpu::Dimension::x));
}

// In steps: the layouts and the target's checks, the workgroup memory, the kernel function (with
// the target's attributes), its arguments and tables, then the body.
StatusOr<OwningOpRef<ModuleOp>> Emitter::runGpu() {
  OwningOpRef<ModuleOp> module = ModuleOp::create(b_.getLoc());
  (*module)->setAttr("gpu.container_module", b_.getUnitAttr());
  b_.setInsertionPointToEnd(module->getBody());
  auto gpuModule = gpu::GPUModuleOp::create(b_, "m3idx_kernels");
  b_.setInsertionPointToStart(gpuModule.getBody());
  M3IDX_RETURN_IF_ERROR(planProgram());
  StatusOr<WorkgroupPlan> plan = planWorkgroupMemory();
  if (!plan.ok())
    return plan.status();
  program_->declareGlobals(gpuModule.getBody(), plan->keysAsF32);
  bindProgram(declareKernel(*plan), *plan);
  emitRegion(k_.body);
  gpu::ReturnOp::create(b_);
  if (!error_.empty())
    return Status::error(fmt::format("kernel @{}: GPU lowering: {}", k_.name, error_));
  if (failed(verify(*module)))
    return Status::error(fmt::format("kernel @{}: emitted GPU MLIR does not verify", k_.name));
  return module;
}

} // namespace m3idx::lowering
