#include "lowering/GpuCompiler.h"

#include "core/EnvTable.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "lowering/GpuModule.h"
#include "lowering/Pipeline.h"

namespace m3idx::lowering {

namespace {

// Everything but the last pass (the serialization), so `lowered` shows what gets serialized.
class WithoutSerialization final : public Target {
public:
  explicit WithoutSerialization(const Target &t) : t_(t) {}
  const TargetDesc &desc() const override { return t_.desc(); }
  BinaryKind binaryKind() const override { return t_.binaryKind(); }
  std::vector<std::string> pipeline() const override {
    std::vector<std::string> p = t_.pipeline();
    p.pop_back();
    return p;
  }

private:
  const Target &t_;
};

} // namespace

StatusOr<std::string> gpuStage(const dsl::Kernel &k, const Target &target, GpuStage stage,
                               std::string *irAfterEachPass) {
  std::unique_ptr<mlir::MLIRContext> ctx = makeContext();
  if (stage == GpuStage::Layouts)
    return gpuLayouts(*ctx, k, target.gpuForm());
  auto module = emitGpuModule(*ctx, k, target.gpuForm());
  if (!module.ok())
    return module.status();
  std::string out;
  llvm::raw_string_ostream os(out);
  if (stage == GpuStage::Mlir) {
    module->get()->print(os);
    return out;
  }
  if (stage == GpuStage::Lowered || stage == GpuStage::Llvm) {
    M3IDX_RETURN_IF_ERROR(runPipeline(module->get(), WithoutSerialization(target), irAfterEachPass));
    if (stage == GpuStage::Lowered) {
      module->get()->print(os);
      return out;
    }
    // What gpu-module-to-binary hands to the LLVM backend: the gpu.module translated on its own.
    Status result = Status::error(fmt::format("kernel @{}: no gpu.module to translate", k.name));
    module->get()->walk([&](mlir::gpu::GPUModuleOp gm) {
      llvm::LLVMContext llvmCtx;
      std::unique_ptr<llvm::Module> ir = mlir::translateModuleToLLVMIR(gm, llvmCtx, k.name);
      if (!ir) {
        result = Status::error(fmt::format("kernel @{}: LLVM IR translation failed", k.name));
        return;
      }
      ir->print(os, nullptr);
      result = Status();
    });
    M3IDX_RETURN_IF_ERROR(result);
    return out;
  }
  if (env::flag("M3IDX_DISABLE_COMPILER")) // as the host compiler: proves a run used only caches
    return Status::error(fmt::format("kernel @{}: the compiler is disabled for target {} "
                                     "(M3IDX_DISABLE_COMPILER=1)",
                                     k.name, target.desc().kind));
  M3IDX_RETURN_IF_ERROR(runPipeline(module->get(), target, irAfterEachPass));
  std::string object;
  module->get()->walk([&](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute a : binary.getObjects())
      if (auto o = mlir::dyn_cast<mlir::gpu::ObjectAttr>(a))
        object = o.getObject().str();
  });
  if (object.empty())
    return Status::error(fmt::format("kernel @{}: target {} produced no object", k.name,
                                     target.desc().kind));
  return target.finishObject(std::move(object));
}

} // namespace m3idx::lowering
