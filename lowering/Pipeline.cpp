#include "lowering/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "tile/TileDialect.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVM/ROCDL/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/ROCDL/ROCDLToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>

#include "lowering/transforms/Passes.h"

namespace m3idx::lowering {

void loadDialects(mlir::MLIRContext &ctx) {
  ctx.loadDialect<mlir::amdgpu::AMDGPUDialect, mlir::NVVM::NVVMDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::gpu::GPUDialect, mlir::LLVM::LLVMDialect, mlir::memref::MemRefDialect,
                  mlir::scf::SCFDialect, mlir::vector::VectorDialect, tile::TileDialect>();
}

// Only what the three targets' pipelines name is registered, so that a static link of MLIR and
// LLVM keeps only those components (scripts/package); a pass or interface missing here makes a
// pipeline fail to parse or convert, which every target's tests would show.
void registerPipelinePasses() {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerConvertVectorToSCFPass();
  mlir::registerSCFToControlFlowPassPass();
  mlir::registerConvertVectorToLLVMPassPass();
  mlir::memref::registerExpandStridedMetadataPassPass();
  mlir::registerFinalizeMemRefToLLVMConversionPassPass();
  mlir::registerArithToLLVMConversionPassPass();
  mlir::registerConvertControlFlowToLLVMPassPass();
  mlir::registerConvertFuncToLLVMPassPass();
  mlir::registerUBToLLVMConversionPassPass();
  mlir::registerReconcileUnrealizedCastsPassPass();
  mlir::registerGpuNVVMAttachTargetPass();
  mlir::registerConvertGpuOpsToNVVMOpsPass();
  mlir::registerConvertNVVMToLLVMPassPass();
  mlir::registerGpuROCDLAttachTargetPass();
  mlir::registerConvertAMDGPUToROCDLPassPass();
  mlir::registerConvertGpuOpsToROCDLOpsPass();
  mlir::registerGpuModuleToBinaryPassPass();
  registerPasses();
}

std::unique_ptr<mlir::MLIRContext> makeContext() {
  static std::once_flag once;
  std::call_once(once, registerPipelinePasses);
  mlir::DialectRegistry registry;
  // The dialects' to-LLVM conversion interfaces (convert-gpu-to-nvvm/rocdl collect patterns from them).
  mlir::arith::registerConvertArithToLLVMInterface(registry);
  mlir::cf::registerConvertControlFlowToLLVMInterface(registry);
  mlir::registerConvertFuncToLLVMInterface(registry);
  mlir::index::registerConvertIndexToLLVMInterface(registry);
  mlir::registerConvertMathToLLVMInterface(registry);
  mlir::registerConvertMemRefToLLVMInterface(registry);
  mlir::registerConvertNVVMToLLVMInterface(registry);
  mlir::ub::registerConvertUBToLLVMInterface(registry);
  mlir::vector::registerConvertVectorToLLVMInterface(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::registerROCDLDialectTranslation(registry);
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
