#include <fmt/format.h>

#include "reference/ReferenceIndexer.h"
#include "runtime/Backend.h"
#include "runtime/HostBackend.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/hip/HipBackend.h"
#include "lowering/Target.h"
#include "lowering/nvvm/GpuCompiler.h"
#include "lowering/nvvm/PtxAssembler.h"

namespace m3idx::runtime {

namespace {

class ReferenceBackend final : public Backend {
public:
  std::string name() const override { return "ref"; }
  StatusOr<IndexerOutput> run(const BatchView &batch, const RunOptions &options) override {
    return reference::runReference(batch, options.keepScores);
  }
};

} // namespace

std::vector<std::string> backendNames() { return {"ref", "host", "cuda", "hip"}; }

namespace {
// A GPU target's code object (sm_90 PTX, gfx950 HSACO) compiled in-process from the DSL kernels.
runtime::CodeSource compileFor(std::unique_ptr<lowering::Target> (*makeTarget)()) {
  return [makeTarget](kernels::KernelKind kind, const kernels::KernelConfig &config) -> StatusOr<std::string> {
    StatusOr<dsl::Kernel> k = kernels::buildKernel(kind, config);
    if (!k.ok())
      return k.status();
    return lowering::gpuStage(*k, *makeTarget(), lowering::GpuStage::Binary);
  };
}
} // namespace

StatusOr<std::unique_ptr<Backend>> makeBackend(const std::string &name) {
  if (name == "ref")
    return std::unique_ptr<Backend>(std::make_unique<ReferenceBackend>());
  if (name == "host")
    return std::unique_ptr<Backend>(std::make_unique<HostBackend>());
  if (name == "cuda") {
    // PTX from the compiler, assembled to a cubin when ptxas is installed.
    auto ptxas = lowering::findPtxas();
    if (!ptxas.ok())
      return ptxas.status();
    runtime::CodeSource code = compileFor(lowering::makeSm90Target);
    if (*ptxas)
      code = [ptx = code, tool = **ptxas](kernels::KernelKind kind,
                                          const kernels::KernelConfig &config) -> StatusOr<std::string> {
        StatusOr<std::string> text = ptx(kind, config);
        if (!text.ok())
          return text.status();
        return lowering::assemblePtx(tool, *text, "sm_90");
      };
    auto cuda = cuda::createCudaBackend(0, code);
    if (!cuda.ok())
      return cuda.status();
    return std::unique_ptr<Backend>(std::move(cuda).value());
  }
  if (name == "hip") {
    auto hip = hip::createHipBackend(0, compileFor(lowering::makeGfx950Target));
    if (!hip.ok())
      return hip.status();
    return std::unique_ptr<Backend>(std::move(hip).value());
  }
  return invalidArgument("--backend", fmt::format("one of {}", fmt::join(backendNames(), ", ")),
                         "'" + name + "'");
}

} // namespace m3idx::runtime
