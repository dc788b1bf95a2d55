// The GPU conversion's driver (GpuPatterns.h): the target's layout pass on the tile form, which ops
// are legal, the patterns run by applyPartialConversion, loops unrolled where the target asked,
// the m3idx-to-sm90 / m3idx-to-gfx950 passes, and a DSL kernel's GPU module and layouts.
#include "lowering/GpuPatterns.h"
#include "lowering/TileConversion.h"

#include <fmt/format.h>

#include <mutex>

#include "lowering/GpuModule.h"
#include "lowering/Pipeline.h"
#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "tile/FromDsl.h"

namespace m3idx::lowering {

using namespace mlir;

namespace {

bool hasLayouts(func::FuncOp fn) {
  bool encoded = false;
  fn.walk([&](Operation *op) {
    for (mlir::Type t : op->getResultTypes())
      if (auto tensor = dyn_cast<RankedTensorType>(t); tensor && tensor.getEncoding())
        encoded = true;
  });
  return encoded;
}

// The kernel's one function, its program's threads, the target's checks and layout pass (unless
// its tiles already carry layouts).
StatusOr<func::FuncOp> assignLayouts(ModuleOp module, const GpuForm &form, int &threads) {
  auto fns = module.getOps<func::FuncOp>();
  if (std::distance(fns.begin(), fns.end()) != 1)
    return Status::error("GPU lowering: a module of tile form holds one func.func, the kernel");
  func::FuncOp fn = *fns.begin();
  const std::string name = fn.getName().str();
  FailureOr<int64_t> warps = tile::warpsOf(fn);
  if (failed(warps))
    return Status::error(fmt::format("kernel @{}: GPU lowering", name));
  const int64_t w = *warps;
  M3IDX_RETURN_IF_ERROR(form.lowering->checkProgram(name, w));
  threads = form.threads * static_cast<int>(w);
  if (!hasLayouts(fn) && (failed(form.lowering->assignLayouts(fn, threads)) || failed(verify(module))))
    return Status::error(fmt::format("kernel @{}: {}'s layout pass failed", name, form.lowering->name()));
  // A convert_layout converts its tile for all its uses.
  Status unlowered;
  fn.walk([&](tile::ConvertLayoutOp c) {
    if (unlowered.ok() && !c.getTile().hasOneUse())
      unlowered = Status::error(fmt::format("kernel @{}: {}'s layout pass converts a tile that is also read "
                                            "unconverted",
                                            name, form.lowering->name()));
  });
  M3IDX_RETURN_IF_ERROR(unlowered);
  return fn;
}

// Loops the target unrolls (m3idx.unroll, set by ForLowering), inner ones first. A hint only: a
// loop the utility cannot unroll stays rolled, with the same results.
void unrollLoops(ModuleOp module) {
  SmallVector<scf::ForOp> loops;
  module.walk([&](scf::ForOp loop) {
    if (loop->hasAttr("m3idx.unroll"))
      loops.push_back(loop);
  });
  for (scf::ForOp loop : loops) {
    const int64_t factor = loop->getAttrOfType<IntegerAttr>("m3idx.unroll").getInt();
    loop->removeAttr("m3idx.unroll");
    (void)loopUnrollByFactor(loop, static_cast<uint64_t>(factor));
  }
}

std::string collected(const std::string &diagnostics) { return diagnostics.empty() ? "" : ": " + diagnostics; }

} // namespace

void configureGpuTarget(ConversionTarget &target) {
  target.addLegalDialect<arith::ArithDialect, scf::SCFDialect, vector::VectorDialect, memref::MemRefDialect,
                         LLVM::LLVMDialect, NVVM::NVVMDialect, amdgpu::AMDGPUDialect, gpu::GPUDialect>();
  target.addIllegalDialect<tile::TileDialect, tensor::TensorDialect>();
  target.addIllegalOp<func::FuncOp>();
  // arith.maxnumf becomes llvm.intr.maxnum (GpuKernelState::maxNum): no device-library call.
  target.addDynamicallyLegalDialect<arith::ArithDialect>(
      [](Operation *op) { return holdsNoTiles(op) && !isa<arith::MaxNumFOp>(op); });
  target.addDynamicallyLegalOp<scf::IfOp, scf::YieldOp>(holdsNoTiles);
  target.addDynamicallyLegalOp<scf::ForOp>(
      [](scf::ForOp op) { return op.getInductionVar().getType().isIndex() && holdsNoTiles(op); });
}

Status convertToGpu(ModuleOp module, const GpuForm &form) {
  MLIRContext *ctx = module.getContext();
  std::string diagnostics;
  ScopedDiagnosticHandler collect(ctx, [&](Diagnostic &d) {
    diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
    return success();
  });
  int threads = 0;
  StatusOr<func::FuncOp> fn = assignLayouts(module, form, threads);
  if (!fn.ok())
    return Status::error(fn.status().message() + collected(diagnostics));
  const std::string name = fn->getName().str();
  GpuKernelState kernel(*fn, *form.lowering, threads);
  M3IDX_RETURN_IF_ERROR(kernel.plan());
  module->setAttr("gpu.container_module", UnitAttr::get(ctx));
  ConversionTarget target(*ctx);
  configureGpuTarget(target);
  RewritePatternSet patterns(ctx);
  populateGpuRegionPatterns(kernel.types(), patterns, kernel);
  populateGpuOpPatterns(kernel.types(), patterns, kernel);
  kernel.program().addPatterns(kernel.types(), patterns);
  ConversionConfig config;
  // No folding: each op's GPU form is its own (a splat of a constant stays a splat).
  config.foldingMode = DialectConversionFoldingMode::Never;
  const bool converted = succeeded(applyPartialConversion(module, target, std::move(patterns), config));
  if (!kernel.error().empty())
    return Status::error(fmt::format("kernel @{}: GPU lowering: {}", name, kernel.error()));
  if (!converted)
    return Status::error(fmt::format("kernel @{}: GPU lowering: an op has no {} form{}", name,
                                     form.lowering->name(), collected(diagnostics)));
  unrollLoops(module);
  if (failed(verify(module)))
    return Status::error(fmt::format("kernel @{}: emitted GPU MLIR does not verify{}", name, collected(diagnostics)));
  return Status();
}

StatusOr<OwningOpRef<ModuleOp>> emitGpuModule(MLIRContext &ctx, const dsl::Kernel &kernel, const GpuForm &form) {
  loadDialects(ctx);
  auto module = tile::fromDsl(kernel, ctx);
  if (!module.ok())
    return module.status();
  M3IDX_RETURN_IF_ERROR(convertToGpu(**module, form));
  return std::move(*module);
}

StatusOr<std::string> gpuLayouts(MLIRContext &ctx, const dsl::Kernel &kernel, const GpuForm &form) {
  loadDialects(ctx);
  auto module = tile::fromDsl(kernel, ctx);
  if (!module.ok())
    return module.status();
  int threads = 0;
  StatusOr<func::FuncOp> fn = assignLayouts(**module, form, threads);
  if (!fn.ok())
    return fn.status();
  GpuKernelState state(*fn, *form.lowering, threads);
  fn->walk([&](tile::DotTilesOp dot) {
    dot->setAttr("m3idx.unit", StringAttr::get(&ctx, dotUnitName(state.program().dotUnit(dot))));
  });
  std::string text;
  llvm::raw_string_ostream os(text);
  (*module)->print(os);
  return text;
}

namespace {

template <const char *Argument, std::unique_ptr<Target> (*MakeTarget)()>
struct GpuConversionPass final : PassWrapper<GpuConversionPass<Argument, MakeTarget>, OperationPass<ModuleOp>> {
  StringRef getArgument() const override { return Argument; }
  StringRef getDescription() const override {
    return "Convert a tile-form kernel to the target's GPU form (its layout pass first, unless its tiles carry layouts)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect, scf::SCFDialect, vector::VectorDialect, memref::MemRefDialect,
                    LLVM::LLVMDialect, NVVM::NVVMDialect, amdgpu::AMDGPUDialect, gpu::GPUDialect>();
  }
  void runOnOperation() override {
    if (Status s = convertToGpu(this->getOperation(), MakeTarget()->gpuForm()); !s.ok()) {
      this->getOperation().emitError(s.message());
      this->signalPassFailure();
    }
  }
};

constexpr char kToSm90[] = "m3idx-to-sm90";
constexpr char kToGfx950[] = "m3idx-to-gfx950";

} // namespace

void registerGpuConversionPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    PassRegistration<GpuConversionPass<kToSm90, makeSm90Target>>();
    PassRegistration<GpuConversionPass<kToGfx950, makeGfx950Target>>();
  });
}

} // namespace m3idx::lowering
