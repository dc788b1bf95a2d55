#include <fmt/format.h>

#include "reference/ReferenceIndexer.h"
#include "runtime/Backend.h"
#include "runtime/GpuCodeCache.h"
#include "runtime/HostBackend.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/hip/HipBackend.h"
#include "lowering/Target.h"
#include "lowering/GpuCompiler.h"
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

StatusOr<std::unique_ptr<Backend>> makeBackend(const std::string &name) {
  if (name == "ref")
    return std::unique_ptr<Backend>(std::make_unique<ReferenceBackend>());
  if (name == "host")
    return std::unique_ptr<Backend>(std::make_unique<HostBackend>());
  if (name == "cuda") {
    // PTX from the compiler, assembled to a cubin when ptxas is installed, through the disk cache.
    auto ptxas = lowering::findPtxas();
    if (!ptxas.ok())
      return ptxas.status();
    auto cuda = cuda::createCudaBackend(0, cachedGpuCode(lowering::makeSm90Target, *ptxas));
    if (!cuda.ok())
      return cuda.status();
    return std::unique_ptr<Backend>(std::move(cuda).value());
  }
  if (name == "hip") {
    auto hip = hip::createHipBackend(0, cachedGpuCode(lowering::makeGfx950Target));
    if (!hip.ok())
      return hip.status();
    return std::unique_ptr<Backend>(std::move(hip).value());
  }
  return invalidArgument("--backend", fmt::format("one of {}", fmt::join(backendNames(), ", ")),
                         "'" + name + "'");
}

} // namespace m3idx::runtime
