// The host conversion's driver (host/HostPatterns.h): which ops are legal, the patterns run by
// applyPartialConversion, the m3idx-to-host pass, and a DSL kernel's host module.
#include "lowering/host/HostPatterns.h"

#include "lowering/TileConversion.h"

#include <fmt/format.h>

#include <mutex>

#include "lowering/Build.h"
#include "lowering/Pipeline.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "tile/FromDsl.h"
#include "tile/TileDialect.h"

namespace m3idx::lowering {

using namespace mlir;

void configureHostTarget(ConversionTarget &target) {
  target.addLegalDialect<arith::ArithDialect, scf::SCFDialect, vector::VectorDialect, memref::MemRefDialect,
                         LLVM::LLVMDialect, func::FuncDialect>();
  target.addIllegalDialect<tile::TileDialect, tensor::TensorDialect>();
  target.addDynamicallyLegalDialect<arith::ArithDialect>(holdsNoTiles);
  target.addDynamicallyLegalOp<scf::IfOp, scf::YieldOp>(holdsNoTiles);
  target.addDynamicallyLegalOp<scf::ForOp>(
      [](scf::ForOp op) { return op.getInductionVar().getType().isIndex() && holdsNoTiles(op); });
  target.addDynamicallyLegalOp<func::FuncOp>([](func::FuncOp fn) { return fn->hasAttr("llvm.emit_c_interface"); });
}

void populateHostPatterns(const HostTypeConverter &converter, RewritePatternSet &patterns, HostKernelState &kernel) {
  populateHostRegionPatterns(converter, patterns, kernel);
  populateHostOpPatterns(converter, patterns, kernel);
}

LogicalResult convertToHost(ModuleOp module, std::string &error, Operation **failedOp) {
  // A wide f4E2M1FN tile would need a nibble-packed buffer, which no kernel has needed.
  Operation *unstored = nullptr;
  module->walk([&](Operation *op) {
    for (mlir::Type t : op->getResultTypes())
      if (HostTiles::wide(t) && isa<Float4E2M1FNType>(cast<ShapedType>(t).getElementType())) {
        unstored = op;
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  if (unstored) {
    error = "host: wide f4E2M1FN tiles are not stored" + sourceOf(unstored->getLoc());
    if (failedOp)
      *failedOp = unstored;
    return failure();
  }
  MLIRContext *ctx = module.getContext();
  HostKernelState kernel;
  HostTypeConverter converter;
  ConversionTarget target(*ctx);
  configureHostTarget(target);
  RewritePatternSet patterns(ctx);
  populateHostPatterns(converter, patterns, kernel);
  ConversionConfig config;
  // No folding: the host form is each op's own (a splat of a constant stays a splat), so that a
  // kernel's code follows its ops.
  config.foldingMode = DialectConversionFoldingMode::Never;
  if (succeeded(applyPartialConversion(module, target, std::move(patterns), config)))
    return success();
  error = kernel.error;
  if (failedOp)
    *failedOp = kernel.failedOp;
  return failure();
}

namespace {

struct HostConversionPass final : PassWrapper<HostConversionPass, OperationPass<ModuleOp>> {
  StringRef getArgument() const override { return "m3idx-to-host"; }
  StringRef getDescription() const override {
    return "Convert tile-form kernels to the host form (func over program ids; vectors and stack buffers)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect, scf::SCFDialect, vector::VectorDialect, memref::MemRefDialect,
                    LLVM::LLVMDialect, func::FuncDialect>();
  }
  void runOnOperation() override {
    std::string error;
    Operation *at = nullptr;
    if (failed(convertToHost(getOperation(), error, &at))) {
      if (!error.empty())
        (at ? at->emitError(error) : getOperation().emitError(error));
      signalPassFailure();
    }
  }
};

} // namespace

void registerHostConversionPass() {
  static std::once_flag once;
  std::call_once(once, [] { PassRegistration<HostConversionPass>(); });
}

StatusOr<OwningOpRef<ModuleOp>> emitHostModule(MLIRContext &ctx, const dsl::Kernel &kernel) {
  loadDialects(ctx); // the tile dialect and the ones it depends on among them
  std::string diagnostics;
  ScopedDiagnosticHandler collect(&ctx, [&](Diagnostic &d) {
    diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
    return success();
  });
  auto module = tile::fromDsl(kernel, ctx);
  if (!module.ok())
    return Status::error(module.status().message() + (diagnostics.empty() ? "" : ": " + diagnostics));
  std::string error;
  if (failed(convertToHost(**module, error)))
    return Status::error(fmt::format("kernel @{}: host lowering: {}", kernel.name,
                                     error.empty() ? "an op has no host form: " + diagnostics : error));
  if (failed(verify(**module)))
    return Status::error(fmt::format("kernel @{}: the host form does not verify: {}", kernel.name, diagnostics));
  return std::move(*module);
}

} // namespace m3idx::lowering
