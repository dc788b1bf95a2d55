// GpuKernelState.h: a GPU kernel's planning (the target's checks, workgroup memory), its kernel
// function, the staging of dot operands where they are defined, dots on FFMA, and the common
// building blocks.
#include "lowering/GpuKernelState.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/Spec.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace m3idx::lowering {

using namespace mlir;
using dsl::Elem;

dsl::Elem elemOf(mlir::Type t) {
  if (t.isInteger(1))
    return Elem::I1;
  if (t.isInteger(8))
    return Elem::I8;
  if (t.isInteger(32))
    return Elem::I32;
  if (t.isInteger(64))
    return Elem::I64;
  if (t.isF32())
    return Elem::F32;
  return isa<Float8E4M3FNType>(t) ? Elem::F8E4M3FN : Elem::F4E2M1FN;
}

namespace {

int64_t lanesOf(mlir::Value tile) { return cast<ShapedType>(tile.getType()).getNumElements(); }
mlir::Type elementOf(mlir::Value tile) { return cast<ShapedType>(tile.getType()).getElementType(); }

} // namespace

// The program's workgroup memory, planned from the tile form before anything is converted.
struct GpuKernelState::WorkgroupPlan {
  enum class Role { StageB, Result, Exchange, Convert };
  struct Buffer {
    Role role;
    mlir::Value b;             // StageB: the b operand
    mlir::Operation *op;       // Result: the dot; Convert: the convert_layout
    mlir::Type type;
    int64_t align = 0; // bytes, where more than the element's is needed
  };
  std::map<int, int64_t> shuffleLanes; // per element type (dsl::Elem): a general shuffle's buffer
  std::vector<Buffer> buffers;         // dot_tiles staging, results, converts, the target's exchange
  bool keysAsF32 = false;              // some extf or FFMA dot_tiles takes a decode's keys as f32
  bool keyWords = false;               // decodes read the target's key table in shared memory
  int64_t keyTilesInFlight = 0;        // the most packed key tiles one loop carries (loads ahead)
};

GpuKernelState::GpuKernelState(func::FuncOp fn, const TargetLowering &target, int threads)
    : fn_(fn), name_(fn.getName().str()), b_(fn.getLoc(), fn.getContext()), target_(target),
      gpu_(b_, target, threads, [this](const std::string &what) { fail(what); }), threads_(threads),
      types_(threads), plan_(std::make_unique<WorkgroupPlan>()), program_(target.program(*this)) {
  warps_ = tile::warpsOf(fn).value_or(1); // checked by the conversion before
  program_->addTypeConversions(types_);
}

GpuKernelState::~GpuKernelState() = default;

void GpuKernelState::enter(ConversionPatternRewriter &rewriter, Operation *op) {
  rewriter_ = &rewriter;
  currentOp_ = op;
  b_.setListener(rewriter.getListener());
  b_.setInsertionPoint(rewriter.getInsertionBlock(), rewriter.getInsertionPoint());
  b_.setLoc(op->getLoc());
}

mlir::Value GpuKernelState::get(mlir::Value tileValue) { return rewriter_->getRemappedValue(tileValue); }

void GpuKernelState::fail(const std::string &what) {
  if (error_.empty())
    error_ = what + (currentOp_ ? sourceOf(currentOp_->getLoc()) : "");
}

mlir::Type GpuKernelState::valueType(mlir::Value tileValue) {
  mlir::Type converted = types_.convertType(tileValue.getType());
  if (converted)
    return converted;
  fail(fmt::format("{} has no type for a tile in layout {}", target_.name(),
                   tile::stringifyLayout(tile::layoutOf(tileValue.getType())).str()));
  return VectorType::get({gpu_.chunk(lanesOf(tileValue))}, elementOf(tileValue));
}

mlir::MemRefType GpuKernelState::workgroupBuffer(int64_t n, mlir::Type e) {
  auto workgroup = gpu::AddressSpaceAttr::get(b_.getContext(), gpu::AddressSpace::Workgroup);
  return MemRefType::get({n}, e, MemRefLayoutAttrInterface{}, workgroup);
}

Status GpuKernelState::plan() {
  WorkgroupPlan &plan = *plan_;
  using Role = WorkgroupPlan::Role;
  int64_t dotBytes = 0;
  auto fromDecode = [](mlir::Value v) { return v.getDefiningOp<tile::DecodeNvfp4Op>() != nullptr; };
  auto storage = [&](mlir::Type e) { return e.isInteger(1) ? mlir::Type(b_.getI8Type()) : e; };
  Status status;
  fn_.walk([&](Operation *op) {
    // One workgroup buffer per element type a general shuffle moves, sized for the largest.
    if (auto shuffle = dyn_cast<tile::ShuffleOp>(op)) {
      const Elem e = elemOf(storage(elementOf(shuffle.getLhs())));
      int64_t &lanes = plan.shuffleLanes[static_cast<int>(e)];
      lanes = std::max<int64_t>(lanes, 2 * lanesOf(shuffle.getLhs()));
    }
    // An atomic's old value reaches a program of several warps through that buffer too.
    if (auto atomic = dyn_cast<tile::AtomicAddOp>(op); atomic && threads_ > target_.shuffleWidth(threads_)) {
      int64_t &lanes = plan.shuffleLanes[static_cast<int>(elemOf(atomic.getValue().getType()))];
      lanes = std::max<int64_t>(lanes, 1);
    }
    if (auto ext = dyn_cast<arith::ExtFOp>(op); ext && fromDecode(ext.getIn()))
      plan.keysAsF32 = true;
    // dot_tiles: a buffer per distinct b operand (bytes for matrix units, else f32), and one for
    // each dot's results unless they move by shuffles (MFMA) or stay in mma.sync or wgmma
    // accumulators.
    auto dot = dyn_cast<tile::DotTilesOp>(op);
    if (!dot || !status.ok())
      return;
    const int64_t k = dot.getK(), M = lanesOf(dot.getLhs()) / k;
    const int64_t bLanes = lanesOf(dot.getRhs()), N = bLanes / k;
    const DotUnit unit = program_->dotUnit(dot);
    if (status = program_->checkDot(dot, unit); !status.ok())
      return;
    plan.keysAsF32 |= unit == DotUnit::Ffma && fromDecode(dot.getLhs());
    StatusOr<TargetProgram::DotStaging> staging = program_->planDot(dot, unit, bLanes);
    if (!staging.ok()) {
      status = staging.status();
      return;
    }
    auto add = [&](WorkgroupPlan::Buffer buffer, int64_t n) {
      plan.buffers.push_back(buffer);
      dotBytes += n * cast<MemRefType>(buffer.type).getElementTypeBitWidth() / 8;
    };
    if (!stageBuf_.count(dot.getRhs())) {
      stageBuf_[dot.getRhs()] = {}; // bound in declareKernel
      mlir::Type e = staging->bytes ? mlir::Type(b_.getI8Type()) : mlir::Type(b_.getF32Type());
      add({Role::StageB, dot.getRhs(), nullptr, workgroupBuffer(staging->elements, e), staging->align},
          staging->elements);
    }
    if (!staging->resultInRegisters)
      add({Role::Result, {}, dot, workgroupBuffer(N * M, b_.getF32Type())}, N * M);
  });
  M3IDX_RETURN_IF_ERROR(status);
  // A convert_layout goes through a buffer of its tile (TargetProgram::convertLayout).
  fn_.walk([&](tile::ConvertLayoutOp c) {
    const int64_t lanes = lanesOf(c.getTile());
    mlir::Type e = storage(elementOf(c.getTile()));
    plan.buffers.push_back({Role::Convert, {}, c, workgroupBuffer(lanes, e)});
    dotBytes += lanes * e.getIntOrFloatBitWidth() / 8;
  });
  if (const int64_t floats = program_->exchangeFloats()) {
    plan.buffers.push_back({Role::Exchange, {}, nullptr, workgroupBuffer(floats, b_.getF32Type())});
    dotBytes += floats * 4;
  }
  if (dotBytes > kMaxDotWorkgroupBytes)
    return Status::error(fmt::format("kernel @{}: dot.tiles needs {} bytes of workgroup memory "
                                     "(at most {}): too many rows x heads for one GPU program",
                                     name_, dotBytes, kMaxDotWorkgroupBytes));
  // sm_90 decodes look their keys up in a table of key bytes per scale, built in shared memory
  // when the program starts (where only f32 keys are read, LLVM drops the unread table).
  std::vector<ShapedType> packedTypes;
  fn_.walk([&](tile::DecodeNvfp4Op d) { packedTypes.push_back(cast<ShapedType>(d.getPacked().getType())); });
  plan.keyWords = target_.keyTables() && !packedTypes.empty();
  // A loop's carried values of a decode's packed-key type are key tiles loaded ahead (each costs
  // registers for its bytes until it is decoded).
  auto packed = [&](mlir::Value v) {
    auto t = dyn_cast<ShapedType>(v.getType());
    return t && llvm::any_of(packedTypes, [&](ShapedType p) {
             return p.getShape() == t.getShape() && p.getElementType() == t.getElementType();
           });
  };
  fn_.walk([&](scf::ForOp loop) {
    plan.keyTilesInFlight =
        std::max<int64_t>(plan.keyTilesInFlight, llvm::count_if(loop.getRegionIterArgs(), packed));
  });
  return Status();
}

gpu::GPUFuncOp GpuKernelState::declareKernel(gpu::GPUModuleOp gpuModule) {
  const WorkgroupPlan &plan = *plan_;
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(gpuModule.getBody());
  program_->declareGlobals(gpuModule.getBody(), plan.keysAsF32);
  SmallVector<mlir::Type> smemTypes;
  for (auto [e, n] : plan.shuffleLanes)
    smemTypes.push_back(workgroupBuffer(n, elemType(b_, static_cast<Elem>(e))));
  for (const WorkgroupPlan::Buffer &pb : plan.buffers)
    smemTypes.push_back(pb.type);
  if (plan.keyWords)
    smemTypes.push_back(workgroupBuffer(512, b_.getI32Type()));
  auto fn = gpu::GPUFuncOp::create(b_, name_, fn_.getFunctionType(), smemTypes);
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b_.getUnitAttr());
  fn.setKnownBlockSizeAttr(b_.getDenseI32ArrayAttr({threads_, 1, 1}));
  program_->annotate(fn, plan.keyTilesInFlight);
  // Bound at the entry's start: the workgroup buffers, the thread id, the target's tables.
  b_.setInsertionPointToStart(&fn.getBody().front());
  size_t w = 0;
  std::map<int, mlir::Value> scratch; // a general shuffle's buffer per element type
  for (auto [e, n] : plan.shuffleLanes)
    scratch[e] = fn.getWorkgroupAttributions()[w++];
  mlir::Value exchange;
  for (const WorkgroupPlan::Buffer &pb : plan.buffers) {
    if (pb.align)
      fn.setWorkgroupAttributionAttr(static_cast<unsigned>(w), LLVM::LLVMDialect::getAlignAttrName(),
                                     b_.getI64IntegerAttr(pb.align));
    mlir::Value buf = fn.getWorkgroupAttributions()[w++];
    switch (pb.role) {
    case WorkgroupPlan::Role::StageB: stageBuf_[pb.b] = buf; break;
    case WorkgroupPlan::Role::Result: dotResult_[pb.op] = buf; break;
    case WorkgroupPlan::Role::Exchange: exchange = buf; break;
    case WorkgroupPlan::Role::Convert: convertBuf_[pb.op] = buf; break;
    }
  }
  gpu_.bind(gpu::ThreadIdOp::create(b_, gpu::Dimension::x), std::move(scratch));
  program_->bind(exchange, plan.keysAsF32,
                 plan.keyWords ? mlir::Value(fn.getWorkgroupAttributions()[w++]) : mlir::Value());
  programId_ = arith::IndexCastOp::create(b_, b_.getI64Type(), gpu::BlockIdOp::create(b_, gpu::Dimension::x));
  return fn;
}

void GpuKernelState::defined(Operation *op, ValueRange converted) {
  for (auto [result, value] : llvm::zip(op->getResults(), converted))
    if (stageBuf_.count(result) && !dotStage_.count(result)) {
      program_->beforeStaging();
      stageDotOperand(result, value, /*barrierBefore=*/false);
    }
}

// Writes a dot_tiles b operand into its workgroup buffer (as f32, or as bytes for a matrix unit,
// whose B fragments the target then makes from it).
void GpuKernelState::stageDotOperand(mlir::Value b, mlir::Value value, bool barrierBefore) {
  mlir::Value buf = stageBuf_.lookup(b);
  const int64_t lanes = lanesOf(b);
  if (barrierBefore)
    gpu_.barrier();
  mlir::Value val = value;
  const bool bytes = cast<MemRefType>(buf.getType()).getElementType().isInteger(8);
  if (bytes)
    val = arith::BitcastOp::create(b_, cast<VectorType>(val.getType()).clone(b_.getI8Type()), val);
  else
    val = toF32(b_, val);
  dotStage_[b] = buf;
  if (program_->stageOwnLayout(b, buf, val))
    return;
  gpu_.storeTile(buf, constant(b_, b_.getI64Type(), 0), val, lanes);
  gpu_.barrier();
  if (bytes)
    program_->stageMatrixB(b, buf, lanes / spec::kIndexHeadDim);
}

// FFMA form: thread t holds ca consecutive lanes of a, i.e. a slice of one row m; it dots the
// slice with every row of the staged b, the g threads of a row sum their parts with xor
// shuffles, and the N x M results reach their owners through a workgroup buffer.
mlir::Value GpuKernelState::ffmaDotTiles(tile::DotTilesOp op, mlir::Value a, mlir::Value b) {
  const int64_t k = op.getK(), aLanes = lanesOf(op.getLhs());
  const int64_t M = aLanes / k, N = lanesOf(op.getRhs()) / k, ca = gpu_.chunk(aLanes);
  mlir::Type f32 = b_.getF32Type(), i64 = b_.getI64Type();
  const auto resultType = VectorType::get({gpu_.chunk(N * M)}, f32);
  if (gpu_.partial(aLanes) || k % ca != 0 || (k / ca) > threads_) {
    fail(fmt::format("dot.tiles: rows of {} lanes do not split evenly over the threads of a tile of {} lanes", k,
                     aLanes));
    return constant(b_, resultType, 0);
  }
  const int64_t g = k / ca; // threads per row of a
  if (!dotStage_.count(op.getRhs()))
    stageDotOperand(op.getRhs(), b, /*barrierBefore=*/true);
  mlir::Value staged = dotStage_.lookup(op.getRhs());
  auto decode = op.getLhs().getDefiningOp<tile::DecodeNvfp4Op>();
  mlir::Value keys = decode ? program_->keysF32(decode) : nullptr;
  if (!keys) // else the decode itself becomes dead and is removed
    keys = toF32(b_, a);
  mlir::Value lane = gpu_.laneI64();
  mlir::Value m = arith::DivSIOp::create(b_, lane, constant(b_, i64, g));
  mlir::Value part = arith::RemSIOp::create(b_, lane, constant(b_, i64, g));
  mlir::Value koff = arith::MulIOp::create(b_, part, constant(b_, i64, ca));
  mlir::Value res = dotResult_.lookup(op);
  for (int64_t n = 0; n < N; ++n) {
    mlir::Value at = arith::AddIOp::create(b_, koff, constant(b_, i64, n * k));
    mlir::Value vb = vector::LoadOp::create(b_, VectorType::get({ca}, f32), staged, ValueRange{toIndex(b_, at)});
    // Products of E4M3 values are exact in f32, so contracting them into FMAs changes nothing.
    auto fm = arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;
    mlir::Value s = vector::ReductionOp::create(b_, vector::CombiningKind::ADD,
                                                arith::MulFOp::create(b_, keys, vb, fm), mlir::Value(), fm);
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

// fmaxf semantics (a NaN operand yields the other). On GPUs arith.maxnumf lowers to a libdevice
// call (__nv_fmaxf) that stays unresolved unless a CUDA toolkit is found at compile time; the LLVM
// intrinsic lowers to max.f32 everywhere.
mlir::Value GpuKernelState::maxNum(mlir::Value a, mlir::Value b) { return LLVM::MaxNumOp::create(b_, a, b); }

} // namespace m3idx::lowering
