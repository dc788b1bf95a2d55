#include "lowering/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVM/ROCDL/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>

#include "lowering/MlirEmitter.h"
#include "lowering/transforms/Passes.h"

namespace m3idx::lowering {

std::unique_ptr<mlir::MLIRContext> makeContext() {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::registerAllPasses();
    registerPasses();
  });
  mlir::DialectRegistry registry;
  mlir::registerAllExtensions(registry); // conversion interfaces the GPU pipelines rely on
  mlir::registerAllToLLVMIRTranslations(registry);
  // The GPU targets' serializers (gpu-module-to-binary): without them MLIR crashes, not errors.
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::ROCDL::registerROCDLTargetInterfaceExternalModels(registry);
  auto ctx = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  loadDialects(*ctx);
  return ctx;
}

Status runPipeline(mlir::ModuleOp module, const Target &target, std::string *irAfterEachPass) {
  mlir::PassManager pm(module->getContext());
  std::string parseErrors;
  llvm::raw_string_ostream errs(parseErrors);
  if (mlir::failed(mlir::parsePassPipeline(target.pipelineText(), pm, errs)))
    return Status::error(fmt::format("target {}: bad pass pipeline '{}': {}", target.desc().kind,
                                     target.pipelineText(), parseErrors));
  llvm::raw_string_ostream log(*(irAfterEachPass ? irAfterEachPass : &parseErrors));
  if (irAfterEachPass)
    pm.enableIRPrinting([](mlir::Pass *, mlir::Operation *) { return false; },
                        [](mlir::Pass *, mlir::Operation *) { return true; },
                        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
                        /*printAfterOnlyOnFailure=*/false, log);
  std::string diagnostics;
  llvm::raw_string_ostream diag(diagnostics);
  mlir::ScopedDiagnosticHandler handler(module->getContext(), [&](mlir::Diagnostic &d) {
    diag << d << "\n";
    return mlir::success();
  });
  if (mlir::failed(pm.run(module)))
    return Status::error(fmt::format("target {}: pipeline failed: {}", target.desc().kind,
                                     diagnostics.empty() ? "(no diagnostic)" : diagnostics));
  return Status();
}

} // namespace m3idx::lowering
