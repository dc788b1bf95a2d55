#include "lowering/nvvm/GpuCompiler.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"

#include "lowering/MlirEmitter.h"
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
  auto module = emitGpuModule(*ctx, k, target.desc().kind == "gfx950" ? kGfx950Form : kSm90Form);
  if (!module.ok())
    return module.status();
  std::string out;
  llvm::raw_string_ostream os(out);
  if (stage == GpuStage::Mlir) {
    module->get()->print(os);
    return out;
  }
  if (stage == GpuStage::Lowered) {
    M3IDX_RETURN_IF_ERROR(runPipeline(module->get(), WithoutSerialization(target), irAfterEachPass));
    module->get()->print(os);
    return out;
  }
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
  return object;
}

} // namespace m3idx::lowering
